"""`settle chaos`: the stack under load with faults scheduled from a seed, then judged."""
