"""ckptlint: finds, fixes and verifies misuse of activation checkpointing."""

__version__ = "0.1.0"
