"""Window assigners and the window aggregator."""
