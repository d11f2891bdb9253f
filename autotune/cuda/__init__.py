"""CUDA data for a GPU machine that cannot host the tuner: compile sm_90 programs here and pack them
(``bundle``), time them on the GPU with only TVM's runtime libraries (``measure``)."""
