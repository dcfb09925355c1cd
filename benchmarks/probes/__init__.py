"""Development probes: small sets of new questions whose trajectories are read while building (not held out)."""
