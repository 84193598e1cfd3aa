"""The figures (matplotlib, Agg): the figure list (plots.plot_all) and the modules that draw them,
with the look they share (plot_style). Imports the data and fits floors.
"""
