"""Type stubs of the native module coolgp._coolgp (see the docstrings for the math)."""
from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "PathLike[str]"]
_F64 = npt.NDArray[np.float64]

__version__: str

class RejectedMessage(ValueError):
    """A peer's message was refused; args = (reason label, explanation). Agent unchanged."""

class Vocabulary:
    """Shared inducing inputs Z [m, d'], K = k(Z, Z) + εI and the seed of the initial q(W)."""

    def __init__(
        self,
        inducing: Optional[int] = None,
        latent_dim: Optional[int] = None,
        seed: int = 0,
        *,
        z: Optional[npt.ArrayLike] = None,
        jitter: Optional[float] = None,
    ) -> None: ...
    @staticmethod
    def load(path: _Path) -> "Vocabulary": ...
    def save(self, path: _Path) -> None: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def inducing(self) -> int: ...
    @property
    def latent_dim(self) -> int: ...
    @property
    def jitter(self) -> float: ...
    @property
    def seed(self) -> int: ...
    @property
    def z(self) -> _F64: ...
    @property
    def k(self) -> _F64: ...
    @property
    def k_inv(self) -> _F64: ...
    def initial_projection(self, input_dim: int) -> Tuple[_F64, _F64]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Agent:
    """One COOL-GP agent (sans-IO: tick() returns bytes, receive() takes them)."""

    def __init__(
        self,
        id: int,
        vocab: Vocabulary,
        input_dim: int,
        *,
        mode: str = "frozen",
        samples: Optional[int] = None,
        normalization: Optional[str] = None,
        projection: str = "per-agent",
        fusion: str = "tree",
        fleet_size: Optional[int] = None,
        learn: bool = True,
        seed: Optional[int] = None,
        projection_group: Optional[str] = None,
        site: Optional[Dict[str, Union[float, str]]] = None,
        local_memory: Optional[int] = None,
        local_policy: Optional[str] = None,
        local_kernel: Optional[str] = None,
        likelihood: Optional[str] = None,
        robust_c: Optional[float] = None,
    ) -> None: ...
    @property
    def id(self) -> int: ...
    @property
    def input_dim(self) -> int: ...
    @property
    def vocabulary(self) -> Vocabulary: ...
    @property
    def neighbors(self) -> List[int]: ...
    @neighbors.setter
    def neighbors(self, ids: Sequence[int]) -> None: ...
    @property
    def points(self) -> int: ...
    @property
    def local_points(self) -> int: ...
    @property
    def fleet_points(self) -> float: ...
    @property
    def blocks(self) -> int: ...
    @property
    def round(self) -> int: ...
    @round.setter
    def round(self, round: int) -> None: ...
    @property
    def neighbors_heard(self) -> int: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def projection(self) -> Dict[str, Any]: ...
    def observe(self, x: npt.ArrayLike, y: npt.ArrayLike) -> None: ...
    def tick(self) -> List[Tuple[int, bytes]]: ...
    def tick_to(self, to: int) -> Optional[bytes]: ...
    def receive(self, payload: bytes) -> None: ...
    def predict(
        self, x: npt.ArrayLike, fused: bool = True, local: bool = False
    ) -> Tuple[_F64, _F64, _F64]: ...
    def local_answers(self, x: npt.ArrayLike, fused: bool = True) -> Dict[str, _F64]: ...
    def natural_params(self, fused: bool = True) -> Tuple[_F64, _F64]: ...
    def posterior(self, fused: bool = True) -> Tuple[_F64, _F64]: ...
    def set_projection(
        self, mean: npt.ArrayLike, std: npt.ArrayLike, sigma_s: float, sigma_n: float
    ) -> None: ...
    def save(
        self,
        path: _Path,
        *,
        fleet: str = "python",
        inputs: Optional[Sequence[str]] = None,
        target: str = "y",
    ) -> None: ...
    @staticmethod
    def load(path: _Path, vocab: Optional[Vocabulary] = None) -> "Agent": ...

class FleetRegressor:
    """A fleet of agents as one scikit-learn style regressor.

    route=K (default 16, as `coolgp simulate --route` and `coolgp query --all --route`; 0:
    every agent): with local memory, predict asks each row only the K agents whose coverage
    is nearest it, and fit's calibration asks each held-out row its owner and the K - 1
    others nearest; K >= the number of agents gives the answers of asking all, bit for bit.

    likelihood="robust" (default "gaussian"; robust_c=c > 0, default 3): each row of a block
    is weighted by (1 + r^2/c^2)^(-1/2) of its standardized residual r, so gross outliers
    barely move the model; frozen mode only, any projection (docs/ROBUST.md).
    """

    def __init__(
        self,
        agents: int = 4,
        inducing: int = 30,
        *,
        latent_dim: Optional[int] = None,
        batch: int = 20,
        fuse_every: int = 10,
        topology: str = "path",
        mode: str = "frozen",
        projection: str = "per-agent",
        site_memory: Optional[str] = None,
        local_memory: Optional[int] = None,
        local_policy: Optional[str] = None,
        local_kernel: Optional[str] = None,
        local_fit: Optional[str] = None,
        fleet_rule: str = "rbcm",
        learn: bool = True,
        seed: int = 0,
        route: int = 16,
        likelihood: Optional[str] = None,
        robust_c: Optional[float] = None,
    ) -> None: ...
    def fit(
        self, x: npt.ArrayLike, y: npt.ArrayLike, groups: Optional[Sequence[Any]] = None
    ) -> "FleetRegressor": ...
    def predict(
        self,
        x: npt.ArrayLike,
        return_std: bool = False,
        *,
        include_noise: bool = False,
        agent: Optional[int] = None,
    ) -> Union[_F64, Tuple[_F64, _F64]]: ...
    def score(self, x: npt.ArrayLike, y: npt.ArrayLike) -> float: ...
    def get_params(self, deep: bool = True) -> Dict[str, Any]: ...
    def __sklearn_clone__(self) -> "FleetRegressor":
        """A new, unfitted regressor with the same settings (sklearn.base.clone)."""
        ...
    @property
    def n_agents_(self) -> Optional[int]: ...
    @property
    def points_(self) -> Optional[List[int]]: ...
    @property
    def local_points_(self) -> Optional[List[int]]: ...
    @property
    def fleet_points_(self) -> Optional[List[float]]: ...
    @property
    def var_scale_(self) -> Optional[float]: ...
    @property
    def residual_weight_(self) -> Optional[float]: ...
    @property
    def fleet_rule_(self) -> Optional[str]: ...
    @property
    def suspects_(self) -> List[int]: ...
    @property
    def route_(self) -> Optional[int]:
        """The K predict routes each row to; 0 when every agent answers every row."""
        ...
    @property
    def answers_asked_(self) -> Optional[int]:
        """Answers (agent x row) the last predict combined."""
        ...

def message_info(payload: bytes) -> Dict[str, Any]:
    """Header fields of a wire message: sender, receiver, round, version, fingerprint, kind
    ('tree', 'push-sum' or 'site'), points, has_site (fleet projection sums), bytes."""
    ...
def simulate(**flags: Any) -> Dict[str, Any]: ...
def combine_answers(
    answers: Sequence[Dict[str, npt.ArrayLike]], rule: str = "rbcm"
) -> Dict[str, _F64]:
    """Several agents' local_answers combined point by point by a fleet rule
    ('rbcm', the default, 'bcm', 'min-variance', 'most-informed')."""
    ...
