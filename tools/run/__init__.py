"""`settle run` and `settle demo`: the whole stack under one supervisor, and a demo batch."""
