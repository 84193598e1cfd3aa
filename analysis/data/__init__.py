"""The runs as tables: reading run directories and wandb (load, records, wandb_io), each run's clocks
to targets and failure (clock_tables, with its parts: clock_options, conditions, horizon, target_clock,
failure_clock, noise_columns, row_values; the crossing rules in crossings/) and the symbols of the
config keys. The ground floor of the analysis: it imports nothing from the fits, the figures or the
reporting.
"""
