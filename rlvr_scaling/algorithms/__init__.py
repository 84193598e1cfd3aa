"""Variant axes of the algorithm: baselines, learning-rate rules, losses, allocators, detectors."""
