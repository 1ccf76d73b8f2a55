"""One-dimensional convolutional network for text given as token ids."""

import numbers

import torch
from torch import nn

from ._common import FeaturesHead


class _ChannelsFirst(nn.Module):
    """Embedded tokens (n, seq_len, dim) to Conv1d layout (n, dim, seq_len)."""

    def forward(self, x):
        return x.transpose(1, 2)


class TextCNN(FeaturesHead):
    """Global-pooling 1-D CNN over word embeddings (the papers' 20 Newsgroups network).

    Eight layers after the embedding, as in the 1-D CNN used for 20 Newsgroups by the
    calibration papers (Guo et al. 2017 and its successors, e.g. Wang et al. 2021): three blocks of
    Conv1d-ReLU separated by two max-pools, a global max-pool, a fully connected ReLU
    layer, and the linear head. The convolutions are zero-padded to keep the length and the
    pools round up, so sequences of any length >= 1 work.

    The input is a batch of token ids, shape ``(n_samples, seq_len)``, integer dtype
    (``input_dtype = torch.long``); id ``padding_idx`` is the padding token, whose
    embedding is zero.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one sample, ``(seq_len,)``.
    n_classes : int
        Number of outputs (logits).
    vocab_size : int, default=20000
        Number of token ids; every id must lie in ``[0, vocab_size)``.
    embedding_dim : int, default=100
        Size of the word embeddings.
    n_filters : int, default=128
        Channels of every convolution.
    kernel_size : int, default=5
        Width of the convolutions (odd, so "same" padding keeps the length).
    pool_size : int, default=5
        Width and stride of the two intermediate max-pools.
    hidden_units : int, default=128
        Width of the fully connected layer before the head.
    dropout : float, default=0.0
        Dropout probability before the head.
    padding_idx : int or None, default=0
        Token id used for padding; None for no padding token.

    References
    ----------
    C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On Calibration of Modern Neural
    Networks", ICML 2017.

    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.
    """

    input_dtype = torch.long

    def __init__(
        self,
        input_shape,
        n_classes,
        vocab_size=20000,
        embedding_dim=100,
        n_filters=128,
        kernel_size=5,
        pool_size=5,
        hidden_units=128,
        dropout=0.0,
        padding_idx=0,
    ):
        super().__init__()
        shape = tuple(input_shape)
        if len(shape) != 1 or not isinstance(shape[0], numbers.Integral) or shape[0] < 1:
            raise ValueError(
                "Expected `input_shape` to be (seq_len,) for textcnn, got "
                f"{input_shape!r}; pass token ids as an array of shape (n_samples, seq_len)."
            )
        if not isinstance(kernel_size, numbers.Integral) or kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(
                f"Expected `kernel_size` to be an odd integer >= 1, got {kernel_size!r}."
            )
        layers = [
            nn.Embedding(vocab_size, embedding_dim, padding_idx=padding_idx),
            _ChannelsFirst(),
        ]
        width = embedding_dim
        for index in range(3):
            layers += [
                nn.Conv1d(width, n_filters, kernel_size, padding=kernel_size // 2),
                nn.ReLU(),
            ]
            width = n_filters
            if index < 2:
                layers.append(nn.MaxPool1d(pool_size, ceil_mode=True))
        layers += [
            nn.AdaptiveMaxPool1d(1),
            nn.Flatten(),
            nn.Linear(width, hidden_units),
            nn.ReLU(),
        ]
        if dropout:
            layers.append(nn.Dropout(dropout))
        self._set_layers(layers, hidden_units, n_classes)
