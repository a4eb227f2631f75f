"""Benchmarks: `settle bench --scenario NAME`, one runner every scenario plugs into."""
