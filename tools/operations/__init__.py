"""`settle review` and `settle breaks`: operators resolve stuck money, audited."""
