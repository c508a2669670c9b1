"""The main job: traffic with injected duplicates through every pattern (`python -m demo`)."""
