"""On-device batch augmentation for images (random crop with padding, horizontal flip) and mixup.

Every random draw comes from an explicit generator on the batch's device (mixup's
mixing weight from a host-side numpy generator), so no step waits for the host and a
seeded fit is reproducible.
"""

import torch
from torch.nn import functional as F

from ._targets import MixedTarget, take

AUGMENTATIONS = ("crop_flip", "crop", "flip")


def crop_padding(image_size):
    """Return the padding of the random crop: an eighth of the image size, at least 1.

    4 pixels for 32x32 (CIFAR) and 28x28 (Fashion-MNIST) images, 1 for 8x8 digits.
    """
    return max(1, round(image_size / 8))


def random_crop(x, padding, generator):
    """Shift each image by up to ``padding`` pixels in each direction, zero-filling.

    Parameters
    ----------
    x : torch.Tensor of shape (n, C, H, W)
    padding : int
    generator : torch.Generator
        Generator on ``x``'s device.

    Returns
    -------
    cropped : torch.Tensor of shape (n, C, H, W)
    """
    n, _, height, width = x.shape
    padded = F.pad(x, (padding, padding, padding, padding))
    offsets = torch.randint(0, 2 * padding + 1, (2, n), device=x.device, generator=generator)
    rows = offsets[0, :, None] + torch.arange(height, device=x.device)
    cols = offsets[1, :, None] + torch.arange(width, device=x.device)
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    channel = torch.arange(x.shape[1], device=x.device)[None, :, None, None]
    return padded[batch, channel, rows[:, None, :, None], cols[:, None, None, :]]


def random_flip(x, generator):
    """Flip each image horizontally with probability 1/2.

    Parameters
    ----------
    x : torch.Tensor of shape (n, C, H, W)
    generator : torch.Generator
        Generator on ``x``'s device.

    Returns
    -------
    flipped : torch.Tensor of shape (n, C, H, W)
    """
    flip = torch.rand(x.shape[0], device=x.device, generator=generator) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(3), x)


def augment_images(x, augment, generator):
    """Apply the augmentation named by ``augment`` to a batch of images.

    Parameters
    ----------
    x : torch.Tensor of shape (n, C, H, W)
    augment : {"crop_flip", "crop", "flip"}
    generator : torch.Generator

    Returns
    -------
    augmented : torch.Tensor of shape (n, C, H, W)
    """
    if augment in ("crop_flip", "crop"):
        x = random_crop(x, crop_padding(min(x.shape[2], x.shape[3])), generator)
    if augment in ("crop_flip", "flip"):
        x = random_flip(x, generator)
    return x


def mixup(x, y, lam, generator):
    """Mix each sample with another of the same batch: ``lam * x + (1 - lam) * x[perm]``.

    Parameters
    ----------
    x : torch.Tensor of shape (n, ...)
        Float inputs.
    y : torch.Tensor of shape (n,) or WeightedTarget
        Class indices (with their sample weights).
    lam : float
        Mixing weight, drawn from Beta(alpha, alpha) by the caller.
    generator : torch.Generator
        Generator on ``x``'s device, for the pairing permutation.

    Returns
    -------
    mixed : torch.Tensor of shape (n, ...)
    target : MixedTarget
    """
    perm = torch.randperm(x.shape[0], device=x.device, generator=generator)
    mixed = x * lam + x.index_select(0, perm) * (1.0 - lam)
    lam_tensor = torch.full((), lam, dtype=torch.float32, device=x.device)
    return mixed, MixedTarget(y, take(y, perm), lam_tensor)
