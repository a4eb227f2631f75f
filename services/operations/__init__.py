"""What operators do with stuck money: resolve settlements under review against the rail, and
close, list and export reconciliation breaks, every action audited in `operator_actions`."""
