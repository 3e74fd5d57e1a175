"""Training: data building, batch sampling and the optimisation loop shared by every method."""
