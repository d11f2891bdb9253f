"""autotune: tune deep learning models with TVM MetaSchedule and learned cost models."""

__version__ = "0.1.0"
