"""The fits on the clock tables: the censored power laws and their bootstrap (fit, with the
censored-normal likelihood, the profile likelihood and the survival estimators beside it; exponents,
seed blocks), competing risks, the failure clock per rollout, the common exponent and trends, the
noise scale and the theory, B_crit, the best B and the recommendation, the sigmoid and gain targets;
and the typed Results that carries them all. Imports the data floor only.
"""
