"""Processors: one `processing_<arch>.py` per architecture turns text (a document, its sentences, several documents)
into that model's tensors and the model's choices back into text. Pipelines, training scripts and benchmarks all
featurize through them, so training and inference see the same inputs."""
