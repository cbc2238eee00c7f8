"""Analysis above the catalog: what a run's verdicts are worth and what they are used for.

- :mod:`.evaluate`: metrics against labels, as the paper reports them;
- :mod:`.confidence`: calibration of p_yes and which verdicts a person should look at;
- :mod:`.review_queue`: that queue for a run of any size, streamed from the catalog;
- :mod:`.capacity`: what N inspections cost on G GPUs;
- :mod:`.reward`: the published RL reward, usable as verl's custom reward function;
- :mod:`.training_data`: confirmed trajectories exported for SFT and GRPO.
"""
