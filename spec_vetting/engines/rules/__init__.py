"""The rules engine family: a classical inspector that needs no GPU, driven through the same loop as the model.

``diagnostics`` measures lines and bands, ``features`` says which ones each task measures and where to zoom,
``redshift`` checks the survey redshift against the lines, ``scoring`` turns measurements into a calibrated
decision, ``engine`` writes the turns.
"""
