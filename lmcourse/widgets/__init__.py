"""Interactive explorers for the lessons (floor 4: stands on everything below but the course).

- :mod:`.cache_explorer`: what the neural cache attends to, token by token (lesson 07);
- :mod:`.bottleneck_explorer`: the rank of a softmax's log-probabilities as d moves (lesson 05).
"""
