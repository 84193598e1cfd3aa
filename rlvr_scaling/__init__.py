"""rlvr-scaling: batch-size scaling studies of RL with verifiable rewards (multi-step GRPO)."""

__version__ = "0.1.0"
