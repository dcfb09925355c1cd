"""Dr. MAS: multi-agent RL with agent-wise advantage normalization."""
