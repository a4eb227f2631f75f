"""settle: settlement services that move money out exactly once in effect."""
