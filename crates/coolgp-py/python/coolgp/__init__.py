"""coolgp: collective online learning of Gaussian processes (COOL-GP) from Python.

Each agent learns a sparse Gaussian process online from its own data, with its own learned
projection q(W) of its inputs into a shared unit-scale domain, and fuses with its neighbours by
exchanging constant-size messages (bytes): no server. This package wraps the Rust crate
`coolgp` (numpy in and out; exceptions instead of crashes; long calls release the GIL).

    >>> import numpy as np, coolgp
    >>> vocab = coolgp.Vocabulary(inducing=30, latent_dim=2, seed=0)
    >>> a = coolgp.Agent(1, vocab, input_dim=2); b = coolgp.Agent(2, vocab, input_dim=2)
    >>> a.neighbors = [2]; b.neighbors = [1]
    >>> X = np.random.default_rng(0).normal(size=(200, 2)); y = np.sin(X[:, 0])
    >>> a.observe(X, y)
    >>> for receiver, payload in a.tick():
    ...     b.receive(payload)
    >>> mean, var_f, var_y = b.predict(X[:5], fused=True)
    >>> b.fleet_points
    200.0

Classes: Vocabulary (the shared inducing inputs), Agent (one agent, sans-IO: you carry the
bytes), FleetRegressor (a whole fleet, scikit-learn style). Functions: simulate (the
`coolgp simulate` command in-process), message_info (decode a payload's header),
combine_answers (several agents' Agent.local_answers combined by a fleet rule).
Exceptions: RejectedMessage (a ValueError) for a refused peer message.
"""

from ._coolgp import (
    Agent,
    FleetRegressor,
    RejectedMessage,
    Vocabulary,
    __version__,
    combine_answers,
    message_info,
    simulate,
)

__all__ = [
    "Agent",
    "FleetRegressor",
    "RejectedMessage",
    "Vocabulary",
    "__version__",
    "combine_answers",
    "message_info",
    "simulate",
]
