"""Keras decoders built from code: the layers that upsample and dilate (frozen GraphDef bytes).

``Conv2D`` → ``DepthwiseConv2D`` with ``dilation_rate`` 2 (TensorFlow builds it as ``SpaceToBatchND`` →
``DepthwiseConv2dNative`` → ``BatchToSpaceND``) → ``Conv2DTranspose`` (stride 2, ``same``) → ``Resizing``
(bicubic) → ``Conv2DTranspose`` (stride 3, ``valid``) → ``Resizing`` (area), ReLUs between. Input
``image`` ``[?, 12, 12, 3]``, seeded weights; builds in about a second.

:func:`keras_fully_convolutional_decoder` takes images of any size (``[?, ?, ?, 3]``): TensorFlow then
computes the dilated convolution's paddings and crops and the transposed convolutions' output sizes at run
time.
"""

from __future__ import annotations

__all__ = ["keras_fully_convolutional_decoder", "keras_upsampling_decoder"]


def keras_upsampling_decoder() -> bytes:
    import keras

    from tests.models.more_models import _freeze_keras

    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((12, 12, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = layers.DepthwiseConv2D(3, dilation_rate=2, padding="same", activation="relu")(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.Resizing(37, 41, interpolation="bicubic")(x)
    x = layers.Conv2DTranspose(4, (4, 3), strides=3, padding="valid")(x)
    outputs = layers.Resizing(20, 30, interpolation="area")(x)
    model = keras.Model(inputs, outputs)
    return _freeze_keras(model, "image", (None, 12, 12, 3))


def keras_fully_convolutional_decoder() -> bytes:
    """``Conv2D`` → dilated ``DepthwiseConv2D`` → ``Conv2DTranspose`` (stride 2, ``same``) →
    ``Conv2DTranspose`` (stride 2, ``valid``) → ``Resizing(37, 41, bicubic)``; input ``image`` [?, ?, ?, 3]."""
    import keras

    from tests.models.more_models import _freeze_keras

    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((None, None, 3))
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    x = layers.DepthwiseConv2D(3, dilation_rate=2, padding="same")(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="same")(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="valid")(x)
    outputs = layers.Resizing(37, 41, interpolation="bicubic")(x)
    return _freeze_keras(keras.Model(inputs, outputs), "image", (None, None, None, 3))
