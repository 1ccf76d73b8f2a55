"""The random generators of a training run: seeded from ``random_state``, recorded, restored.

A fresh fit draws four seeds from ``random_state``: torch's global generator (weight
initialisation, dropout; on CUDA the device's generator too), the batch order, numpy's
generator (mixup weights) and the validation split. A run's generators are a torch
generator on the device, numpy's generator and the split seed (:class:`RunGenerators`);
their states at the end of each epoch, with torch's global ones, are the net's
``rng_state_``, from which ``partial_fit``, ``fit_loop`` and a resumed checkpoint continue.
All of this happens inside ``torch.random.fork_rng``, so the caller's generators are
unchanged.
"""

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.utils import check_random_state


def cuda_devices(device):
    """Return the CUDA device indices whose generators a fit on ``device`` uses (or [])."""
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


def fit_seeds(random_state):
    """Seeds from ``random_state``: torch's global generator, the batch order, numpy, split."""
    return check_random_state(random_state).randint(0, 2**31 - 1, size=4).tolist()


def resolve_split_seed(random_state, seed=None):
    """Return ``seed``, or if it is None the split seed a fresh fit draws from ``random_state``."""
    return fit_seeds(random_state)[3] if seed is None else seed


def seed_torch(device, seed):
    """Seed torch's global generator (and the CUDA device's, on CUDA) with ``seed``."""
    torch.default_generator.manual_seed(seed)
    cuda = cuda_devices(device)
    if cuda:
        with torch.cuda.device(cuda[0]):
            torch.cuda.manual_seed(seed)


def generator_states(device, generator, np_rng, split_seed):
    """The states of a run's generators now, as a net's ``rng_state_``.

    Parameters
    ----------
    device : torch.device
        The net's device; on CUDA, the device's generator state is recorded too.
    generator : torch.Generator
        The generator of the batch order.
    np_rng : numpy.random.Generator
        numpy's generator (augmentation, mixing).
    split_seed : int
        Seed of the validation split.

    Returns
    -------
    dict
        ``device_type``, ``torch`` (the global generator), ``cuda`` (None off CUDA),
        ``generator``, ``numpy`` and ``split_seed``.
    """
    return {
        "device_type": device.type,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "generator": generator.get_state(),
        "numpy": np_rng.bit_generator.state,
        "split_seed": split_seed,
    }


@dataclass
class RunGenerators:
    """The generators of one training run.

    Attributes
    ----------
    generator : torch.Generator
        On the device: the order of the samples, augmentation, mixup pairing.
    np_rng : numpy.random.Generator
        The mixup weights.
    split_seed : int
        Seed of the validation split.
    """

    generator: torch.Generator
    np_rng: np.random.Generator
    split_seed: int

    @classmethod
    def from_seeds(cls, device, seeds):
        """Return the generators of a fresh fit from :func:`fit_seeds`'s ``seeds``."""
        generator = torch.Generator(device=device).manual_seed(seeds[1])
        return cls(generator, np.random.default_rng(seeds[2]), seeds[3])

    @classmethod
    def from_state(cls, state, device, random_state):
        """Set torch's global generator from ``state`` and return the run's generators.

        ``state`` is a ``rng_state_``; one recorded on another device type (a model
        fitted on CUDA continued on the CPU) gives generators seeded from
        ``random_state`` instead. Call it inside ``torch.random.fork_rng``.
        """
        if state["device_type"] != device.type:
            seeds = fit_seeds(random_state)
            torch.default_generator.manual_seed(seeds[0])
            return cls.from_seeds(device, seeds)
        generator = torch.Generator(device=device)
        torch.set_rng_state(state["torch"])
        cuda = cuda_devices(device)
        if cuda:
            torch.cuda.set_rng_state(state["cuda"], cuda[0])
        generator.set_state(state["generator"])
        np_rng = np.random.default_rng()
        np_rng.bit_generator.state = state["numpy"]
        return cls(generator, np_rng, state["split_seed"])

    @classmethod
    def from_global(cls, device):
        """Return generators for training batches drawn outside a training run.

        They are seeded from torch's global generator, as the order of skorch's
        shuffling DataLoader is.
        """
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
        generator = torch.Generator(device=device).manual_seed(seed)
        return cls(generator, np.random.default_rng(seed), seed)

    def state(self, device):
        """Return the states now, with torch's global ones (a ``rng_state_``)."""
        return generator_states(device, self.generator, self.np_rng, self.split_seed)


__all__ = [
    "RunGenerators",
    "cuda_devices",
    "fit_seeds",
    "generator_states",
    "resolve_split_seed",
    "seed_torch",
]
