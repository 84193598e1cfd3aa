"""The runs as tables: reading run directories and wandb (load, records, wandb_io), each run's clocks
to targets and failure (clock_tables) and the symbols of the config keys. The ground floor of the
analysis: it imports nothing from the fits, the figures or the reporting.
"""
