"""Where a pool's bytes live and how they are reached: the metadata memfd's layout, sealed memfds and host blocks,
CUDA's driver, contexts, VMM blocks, readiness (timeline values, events), imports from another GPU, streams as
users hold them, copies between any two addresses, and the array protocols (DLPack, the CUDA Array Interface) over
them.  Nothing here knows of ROS."""
