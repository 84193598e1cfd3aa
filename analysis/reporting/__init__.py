"""What a reader gets: report.md (markdown: the sections in order; sections: every section rendered;
text: numbers and tables as text), report.html and the wandb analysis run. Imports the data and fits
floors.
"""
