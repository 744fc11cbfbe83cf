"""Where a pool's bytes live and how they cross processes: the metadata memfd's layout, sealed memfds and host
blocks, CUDA's driver, contexts, VMM blocks, readiness (timeline values, events), imports from another GPU, and the
array protocols (DLPack, the CUDA Array Interface) over them.  Nothing here knows of ROS."""
