"""The direct delivery path (DESIGN §14): each publication also goes, as a few dozen packed bytes, down a
connection to every subscriber that asked for it on the pool's own socket, and its callback runs on the
thread that receives it, outside the executor.

``wire``: the request and the records; ``channels``: the publisher's side of the connections (never blocks);
``sender``: what a typed publisher writes per publication; ``receiver``: the subscriber's delivery thread;
``frames``: the typed message a record stands for; ``switch_interval``: how long a thread waits for the GIL while a
receiver lives.  Subscriptions choose it with ``delivery="direct"``.
"""
