"""What a ROS node and a tool of ours share: start-up and clean stops, parameters and arguments, executors,
``/diagnostics`` and the checks that say why a topic brings nothing."""
