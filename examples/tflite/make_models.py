"""Writes the TFLite test models and their reference outputs (run once, by hand).

    pip install tensorflow-cpu tf-keras ai-edge-litert   # development time only
    python examples/tflite/make_models.py [NAME ...]

``cnn_uint8_deep``, ``if_else`` and the ``*_tensors.npz`` files need only LiteRT
(``python examples/tflite/make_models.py cnn_uint8_deep tensors if_else``).

Each model ``NAME.tflite`` gets ``NAME.npz`` beside it: the inputs (``input_K``)
and the outputs TFLite's own interpreter computed for them (``output_K``), so the
tests compare against a real interpreter without TensorFlow or LiteRT installed.
Inputs are seeded; rerunning reproduces the files up to converter changes.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import flatbuffers
import numpy as np

try:
    import tensorflow as tf
except ImportError:  # the models written with LiteRT's schema alone need no TensorFlow
    tf = None

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(17)


def small_cnn(input_shape=(16, 16, 3), blocks=16, hidden=0) -> tf.keras.Model:
    """A MobileNet-like net: conv, depthwise-separable blocks with residuals, pooling, dense."""
    tf.keras.utils.set_random_seed(1)
    L = tf.keras.layers
    x_in = tf.keras.Input(input_shape, batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(x_in)
    for i in range(blocks):
        y = L.DepthwiseConv2D(3, padding="same", activation="relu")(x)
        y = L.Conv2D(8, 1, padding="same")(y)
        x = L.Add()([x, y]) if i % 2 == 0 else L.Concatenate()([x, y])
        x = L.Conv2D(8, 1, activation="relu")(x)
    x = L.MaxPooling2D(2)(x)
    x = L.AveragePooling2D(2, padding="same")(x)
    x = L.Reshape((-1,))(x)
    if hidden:  # wide enough (>= 1024 weights) for the converter to quantize its weights
        x = L.Dense(hidden, activation="relu")(x)
    x = L.Dense(10)(x)
    x = L.Activation("tanh")(x)
    out = L.Softmax()(x)
    return tf.keras.Model(x_in, out)


def representative(shape):
    def gen():
        for _ in range(32):
            yield [RNG.uniform(-1, 1, size=(1, *shape)).astype(np.float32)]

    return gen


def run_interpreter(content: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interp = tf.lite.Interpreter(model_content=content)
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x.astype(d["dtype"]))
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def save(name: str, content: bytes, inputs: list[np.ndarray]) -> None:
    (HERE / f"{name}.tflite").write_bytes(content)
    outputs = run_interpreter(content, inputs)
    arrays = {f"input_{k}": v for k, v in enumerate(inputs)}
    arrays.update({f"output_{k}": v for k, v in enumerate(outputs)})
    np.savez(HERE / f"{name}.npz", **arrays)
    print(f"{name}: {len(content)} bytes, outputs {[o.shape for o in outputs]}")


def cnn_float16() -> None:
    model = small_cnn()
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]
    x = RNG.uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
    save("cnn_float16", conv.convert(), [x])


def cnn_int8() -> None:
    model = small_cnn()
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative((16, 16, 3))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    # NNAPI's FULLY_CONNECTED has no per-channel weights: quantize dense layers per tensor
    conv._experimental_disable_per_channel_quantization_for_dense_layers = True
    content = conv.convert()
    d = tf.lite.Interpreter(model_content=content).get_input_details()[0]
    scale, zp = d["quantization"]
    xf = RNG.uniform(-1, 1, (1, 16, 16, 3))
    x = np.clip(np.round(xf / scale + zp), -128, 127).astype(np.int8)
    save("cnn_int8", content, [x])


def cnn_dynamic_range() -> None:
    """Dynamic-range quantization: int8 weights where the layer has >= 1024 of them (the
    hidden dense layer), float activations: a hybrid FULLY_CONNECTED the delegate refuses."""
    model = small_cnn(hidden=64)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]  # int8 weights, float activations
    x = RNG.uniform(-1, 1, (1, 16, 16, 3)).astype(np.float32)
    save("cnn_dynamic_range", conv.convert(), [x])


def cnn_uint8() -> None:
    """A TF1-style quantization-aware graph: the converter keeps it uint8 end to end."""
    g = tf.Graph()
    with g.as_default():
        v1 = tf.compat.v1
        fq = tf.quantization.fake_quant_with_min_max_args
        x = v1.placeholder(tf.float32, (1, 8, 8, 3), name="x")
        h = fq(x, min=-1.0, max=1.0)
        rng = np.random.default_rng(3)
        w1 = fq(
            tf.constant(rng.uniform(-0.5, 0.5, (3, 3, 3, 6)).astype(np.float32)), min=-0.5, max=0.5
        )
        h = tf.nn.conv2d(h, w1, strides=1, padding="SAME")
        h = tf.nn.bias_add(h, tf.constant(rng.uniform(-0.1, 0.1, 6).astype(np.float32)))
        h = fq(tf.nn.relu6(h), min=0.0, max=6.0)
        wd = fq(
            tf.constant(rng.uniform(-0.5, 0.5, (3, 3, 6, 1)).astype(np.float32)), min=-0.5, max=0.5
        )
        h = tf.nn.depthwise_conv2d(h, wd, strides=[1, 2, 2, 1], padding="SAME")
        h = fq(tf.nn.relu6(h), min=0.0, max=6.0)
        h = fq(tf.nn.avg_pool2d(h, 2, 2, "VALID"), min=0.0, max=6.0)
        h = tf.reshape(h, (1, -1))
        w2 = fq(tf.constant(rng.uniform(-0.5, 0.5, (24, 5)).astype(np.float32)), min=-0.5, max=0.5)
        h = fq(tf.matmul(h, w2), min=-8.0, max=8.0)
        out = fq(tf.nn.softmax(h), min=0.0, max=1.0, name="y")
        with v1.Session(graph=g) as sess:
            conv = v1.lite.TFLiteConverter.from_session(sess, [x], [out])
            conv.inference_type = tf.uint8
            conv.quantized_input_stats = {"x": (127.5, 127.5)}
            content = conv.convert()
    xq = RNG.integers(0, 256, (1, 8, 8, 3)).astype(np.uint8)
    save("cnn_uint8", content, [xq])


def lstm() -> None:
    """tf_keras (Keras 2) LSTM: the converter fuses it into UNIDIRECTIONAL_SEQUENCE_LSTM."""
    import tf_keras

    tf_keras.utils.set_random_seed(2)
    L = tf_keras.layers
    x_in = tf_keras.Input((6, 4), batch_size=1)
    h = L.LSTM(8, return_sequences=True)(x_in)
    out = L.Dense(3)(h)
    model = tf_keras.Model(x_in, out)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    x = RNG.uniform(-1, 1, (1, 6, 4)).astype(np.float32)
    save("lstm", conv.convert(), [x])


def lstm_while() -> None:
    """Keras 3 LSTM: converted as a WHILE loop over the time steps."""
    tf.keras.utils.set_random_seed(2)
    L = tf.keras.layers
    x_in = tf.keras.Input((6, 4), batch_size=1)
    h = L.LSTM(8, return_sequences=True)(x_in)
    out = L.Dense(3)(h)
    model = tf.keras.Model(x_in, out)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    x = RNG.uniform(-1, 1, (1, 6, 4)).astype(np.float32)
    save("lstm_while", conv.convert(), [x])


def while_loop() -> None:
    w = tf.constant(np.random.default_rng(5).uniform(-0.5, 0.5, (4, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec((1, 4), tf.float32), tf.TensorSpec((), tf.int32)])
    def f(x, n):
        i = tf.constant(0)

        def cond(i, x):
            return tf.less(i, n)

        def body(i, x):
            return i + 1, tf.tanh(tf.matmul(x, w) + 0.5)

        _, y = tf.while_loop(cond, body, [i, x])
        return y

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    x = RNG.uniform(-1, 1, (1, 4)).astype(np.float32)
    save("while_loop", conv.convert(), [x, np.array(5, np.int32)])


LIMIT = 2.0


def custom_op() -> None:
    """ADD then a CUSTOM 'SoftClip' (limit * tanh(x / limit)) with custom options
    {"limit": 2.0}: written with the flatbuffer builder and the generated schema code,
    since converters emit custom operators only for ops they cannot lower. The reference
    is TensorFlow's tanh."""
    import tflite as S

    c = np.array([[0.5, 0.5, -0.25, 1.0]], np.float32)
    b = flatbuffers.Builder(1024)

    def ints(start, values):
        start(b, len(values))
        for v in reversed(values):
            b.PrependInt32(v)
        return b.EndVector()

    def tensor(name, buffer):
        n = b.CreateString(name)
        shape = ints(S.TensorStartShapeVector, [1, 4])
        S.TensorStart(b)
        S.TensorAddShape(b, shape)
        S.TensorAddType(b, S.TensorType.FLOAT32)
        S.TensorAddBuffer(b, buffer)
        S.TensorAddName(b, n)
        return S.TensorEnd(b)

    def buffer(data: bytes | None):
        vec = b.CreateByteVector(data) if data else None
        S.BufferStart(b)
        if vec is not None:
            S.BufferAddData(b, vec)
        return S.BufferEnd(b)

    def opcode(builtin, custom=None):
        name = b.CreateString(custom) if custom else None
        S.OperatorCodeStart(b)
        S.OperatorCodeAddDeprecatedBuiltinCode(b, min(builtin, 127))
        S.OperatorCodeAddBuiltinCode(b, builtin)
        S.OperatorCodeAddVersion(b, 1)
        if name is not None:
            S.OperatorCodeAddCustomCode(b, name)
        return S.OperatorCodeEnd(b)

    def operator(index, inputs, outputs, add_options=False, custom_options=None):
        ins = ints(S.OperatorStartInputsVector, inputs)
        outs = ints(S.OperatorStartOutputsVector, outputs)
        custom = b.CreateByteVector(custom_options) if custom_options else None
        opts = None
        if add_options:
            S.AddOptionsStart(b)
            S.AddOptionsAddFusedActivationFunction(b, 0)
            opts = S.AddOptionsEnd(b)
        S.OperatorStart(b)
        S.OperatorAddOpcodeIndex(b, index)
        S.OperatorAddInputs(b, ins)
        S.OperatorAddOutputs(b, outs)
        if opts is not None:
            S.OperatorAddBuiltinOptionsType(b, S.BuiltinOptions.AddOptions)
            S.OperatorAddBuiltinOptions(b, opts)
        if custom is not None:
            S.OperatorAddCustomOptions(b, custom)
            S.OperatorAddCustomOptionsFormat(b, S.CustomOptionsFormat.FLEXBUFFERS)
        return S.OperatorEnd(b)

    def vector(start, items):
        start(b, len(items))
        for it in reversed(items):
            b.PrependUOffsetTRelative(it)
        return b.EndVector()

    tensors = [tensor("x", 1), tensor("c", 2), tensor("sum", 1), tensor("y", 1)]
    from flatbuffers import flexbuffers

    options = flexbuffers.Dumps({"limit": LIMIT})  # TFLite's convention: a FlexBuffer map
    ops = [
        operator(0, [0, 1], [2], add_options=True),
        operator(1, [2], [3], custom_options=options),
    ]
    tv = vector(S.SubGraphStartTensorsVector, tensors)
    ov = vector(S.SubGraphStartOperatorsVector, ops)
    iv, outv = ints(S.SubGraphStartInputsVector, [0]), ints(S.SubGraphStartOutputsVector, [3])
    S.SubGraphStart(b)
    S.SubGraphAddTensors(b, tv)
    S.SubGraphAddInputs(b, iv)
    S.SubGraphAddOutputs(b, outv)
    S.SubGraphAddOperators(b, ov)
    sg = S.SubGraphEnd(b)
    codes = [opcode(S.BuiltinOperator.ADD), opcode(S.BuiltinOperator.CUSTOM, "SoftClip")]
    bufs = [buffer(None), buffer(None), buffer(c.tobytes())]
    cv, sv = (
        vector(S.ModelStartOperatorCodesVector, codes),
        vector(S.ModelStartSubgraphsVector, [sg]),
    )
    bv = vector(S.ModelStartBuffersVector, bufs)
    desc = b.CreateString("nnhal test: a custom operator")
    S.ModelStart(b)
    S.ModelAddVersion(b, 3)
    S.ModelAddOperatorCodes(b, cv)
    S.ModelAddSubgraphs(b, sv)
    S.ModelAddDescription(b, desc)
    S.ModelAddBuffers(b, bv)
    b.Finish(S.ModelEnd(b), file_identifier=b"TFL3")
    content = bytes(b.Output())
    x = RNG.uniform(-3, 3, (1, 4)).astype(np.float32)
    y = (LIMIT * tf.tanh((tf.constant(x) + tf.constant(c)) / LIMIT)).numpy()
    (HERE / "custom_op.tflite").write_bytes(content)
    np.savez(HERE / "custom_op.npz", input_0=x, output_0=y)
    print(f"custom_op: {len(content)} bytes (reference from TensorFlow, no interpreter run)")


def mobilenet_v3_like(blocks: int = 30) -> tf.keras.Model:
    """A MobileNetV3-shaped net at toy width: inverted residual blocks (1x1 expand,
    depthwise, squeeze-excite, 1x1 project, residual add), hard-swish, batch norms
    (folded by the converter), global pooling and a classifier."""
    tf.keras.utils.set_random_seed(7)
    L = tf.keras.layers
    rng = np.random.default_rng(8)
    x_in = tf.keras.Input((32, 32, 3), batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x_in)
    x = L.BatchNormalization()(x)
    x = L.Activation("hard_swish")(x)
    width = 8
    for i in range(blocks):
        stride = 2 if i in (3, 10) else 1
        out_width = width + 4 if stride == 2 else width
        act = "relu" if i < blocks // 3 else "hard_swish"
        y = L.Conv2D(width * 2, 1, use_bias=False)(x)
        y = L.BatchNormalization()(y)
        y = L.Activation(act)(y)
        y = L.DepthwiseConv2D(5 if i % 4 == 3 else 3, strides=stride, padding="same")(y)
        y = L.Activation(act)(y)
        if i % 2 == 1:  # squeeze-excite
            s = L.GlobalAveragePooling2D(keepdims=True)(y)
            s = L.Conv2D(max(width // 2, 4), 1, activation="relu")(s)
            s = L.Conv2D(width * 2, 1, activation="hard_sigmoid")(s)
            y = L.Multiply()([y, s])
        y = L.Conv2D(out_width, 1, use_bias=False)(y)
        y = L.BatchNormalization()(y)
        x = L.Add()([x, y]) if stride == 1 and out_width == width else y
        width = out_width
    x = L.Conv2D(32, 1, activation="hard_swish")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    model = tf.keras.Model(x_in, L.Softmax()(x))
    for layer in model.layers:  # batch norms that are not the identity
        if isinstance(layer, L.BatchNormalization):
            n = layer.get_weights()[0].shape[0]
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, n).astype(np.float32),
                    rng.uniform(-0.2, 0.2, n).astype(np.float32),
                    rng.uniform(-0.2, 0.2, n).astype(np.float32),
                    rng.uniform(0.5, 1.5, n).astype(np.float32),
                ]
            )
    return model


def cnn_large_float16() -> None:
    """Several hundred operators (float16 weights behind DEQUANTIZE), a few hundred KB."""
    conv = tf.lite.TFLiteConverter.from_keras_model(mobilenet_v3_like())
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]
    x = RNG.uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)
    save("cnn_large_float16", conv.convert(), [x])


def _prune(model, rng, fraction: float, block: int = 1) -> None:
    """Zero ``fraction`` of every kernel (in blocks of ``block`` along the input axis)."""
    for layer in model.layers:
        w = layer.get_weights()
        if not w:
            continue
        k = w[0]
        if block == 1:
            k[rng.uniform(size=k.shape) < fraction] = 0
        else:  # Dense kernels are (in, out): blocks of `block` consecutive inputs
            mask = rng.uniform(size=(k.shape[0] // block, k.shape[1])) < fraction
            k[np.repeat(mask, block, axis=0)] = 0
        layer.set_weights([k, *w[1:]])


def sparse_cnn() -> None:
    """Pruned weights (80% zeros), converted with EXPERIMENTAL_SPARSITY and float16: every
    kernel is a sparse float16 constant behind DENSIFY then DEQUANTIZE."""
    tf.keras.utils.set_random_seed(3)
    L = tf.keras.layers
    x_in = tf.keras.Input((8, 8, 3), batch_size=1)
    x = L.Conv2D(16, 3, padding="same", activation="relu")(x_in)
    x = L.DepthwiseConv2D(3, padding="same", activation="relu6")(x)
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Reshape((-1,))(x)
    x = L.Dense(10)(x)
    model = tf.keras.Model(x_in, L.Softmax()(x))
    _prune(model, np.random.default_rng(4), 0.8)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY, tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_types = [tf.float16]
    x = RNG.uniform(-1, 1, (1, 8, 8, 3)).astype(np.float32)
    save("sparse_cnn", conv.convert(), [x])


def sparse_block_fc() -> None:
    """Block-sparse (1x4) float32 dense layers. The converter hands such weights straight
    to FULLY_CONNECTED (its kernel reads them sparse); a DENSIFY is put in front of each
    with LiteRT's schema object API, so TFLite's own DENSIFY kernel makes the reference."""
    from ai_edge_litert import schema_py_generated as schema

    tf.keras.utils.set_random_seed(5)
    L = tf.keras.layers
    x_in = tf.keras.Input((32,), batch_size=1)
    x = L.Dense(16, activation="relu")(x_in)
    model = tf.keras.Model(x_in, L.Dense(8)(x))
    _prune(model, np.random.default_rng(6), 0.7, block=4)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    m = schema.ModelT.InitFromPackedBuf(conv.convert(), 0)
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.DENSIFY
    code.version = 1
    m.operatorCodes.append(code)
    sg = m.subgraphs[0]
    front = []
    for op in sg.operators:
        op.inputs = [int(i) for i in op.inputs]
        for pos, t in enumerate(op.inputs):
            src = sg.tensors[t]
            if src.sparsity is None:
                continue
            dense = schema.TensorT()
            dense.shape, dense.type, dense.buffer = list(src.shape), src.type, 0
            dense.name = (
                src.name + b"/dense" if isinstance(src.name, bytes) else src.name + "/dense"
            )
            sg.tensors.append(dense)
            d = schema.OperatorT()
            d.opcodeIndex, d.inputs, d.outputs = (
                len(m.operatorCodes) - 1,
                [t],
                [len(sg.tensors) - 1],
            )
            front.append(d)
            op.inputs[pos] = len(sg.tensors) - 1
    sg.operators = front + list(sg.operators)
    for c in m.operatorCodes:  # version 8 means sparse weights; dense float weights are 1
        if c.builtinCode == schema.BuiltinOperator.FULLY_CONNECTED:
            c.version = 1
    b = flatbuffers.Builder(4096)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    x = RNG.uniform(-1, 1, (1, 32)).astype(np.float32)
    save("sparse_block_fc", bytes(b.Output()), [x])


def cnn_uint8_deep() -> None:
    """The 71-operator cnn_int8 made uint8 end to end as older converters wrote quantized
    CNNs (MobileNet v1 quant): every int8 tensor shifted by 128; per-channel conv weights
    requantized per tensor (uint8 convolutions in TFLite have per-tensor weights), their
    biases with them. Written with LiteRT's schema object API, no TensorFlow; the reference
    outputs are LiteRT's."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.interpreter import Interpreter

    m = schema.ModelT.InitFromPackedBuf((HERE / "cnn_int8.tflite").read_bytes(), 0)
    sg = m.subgraphs[0]
    conv_ops = (schema.BuiltinOperator.CONV_2D, schema.BuiltinOperator.DEPTHWISE_CONV_2D)
    for c in m.operatorCodes:
        c.version = 1  # the uint8 kernels are every builtin's first version
    requantized = set()  # the filters already made uint8 per tensor
    for op in sg.operators:
        if m.operatorCodes[op.opcodeIndex].builtinCode not in conv_ops:
            continue
        f = sg.tensors[op.inputs[1]]
        q = f.quantization
        data = np.frombuffer(bytes(m.buffers[f.buffer].data), np.int8).reshape(f.shape)
        axis = q.quantizedDimension
        shape = [1] * data.ndim
        shape[axis] = -1
        w = data.astype(np.float32) * np.asarray(q.scale, np.float32).reshape(shape)
        scale = float(np.abs(w).max()) / 127 or 1.0
        m.buffers[f.buffer].data = (
            (np.clip(np.round(w / scale), -127, 127) + 128).astype(np.uint8).ravel()
        )
        requantized.add(int(op.inputs[1]))
        f.type = schema.TensorType.UINT8
        q.scale, q.zeroPoint, q.quantizedDimension = [scale], [128], 0
        b = sg.tensors[op.inputs[2]]
        in_scale = float(sg.tensors[op.inputs[0]].quantization.scale[0])
        bias = np.frombuffer(bytes(m.buffers[b.buffer].data), np.int32) * np.asarray(
            b.quantization.scale, np.float64
        )
        m.buffers[b.buffer].data = np.frombuffer(
            np.round(bias / (in_scale * scale)).astype(np.int32).tobytes(), np.uint8
        )
        b.quantization.scale, b.quantization.zeroPoint = [in_scale * scale], [0]
        b.quantization.quantizedDimension = 0
    for k, t in enumerate(sg.tensors):
        if t.type != schema.TensorType.INT8 or k in requantized:
            continue
        assert len(t.quantization.scale) == 1, t.name
        t.type = schema.TensorType.UINT8
        t.quantization.zeroPoint = [int(t.quantization.zeroPoint[0]) + 128]
        if t.buffer and m.buffers[t.buffer].data is not None and len(m.buffers[t.buffer].data):
            raw = np.frombuffer(bytes(m.buffers[t.buffer].data), np.int8)
            m.buffers[t.buffer].data = (raw.astype(np.int16) + 128).astype(np.uint8)
    b = flatbuffers.Builder(1 << 16)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    content = bytes(b.Output())
    xq = np.random.default_rng(19).integers(0, 256, (1, 16, 16, 3)).astype(np.uint8)
    interp = Interpreter(model_content=content, num_threads=1)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], xq)
    interp.invoke()
    (out,) = [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]
    (HERE / "cnn_uint8_deep.tflite").write_bytes(content)
    np.savez(HERE / "cnn_uint8_deep.npz", input_0=xq, output_0=out)
    print(f"cnn_uint8_deep: {len(content)} bytes, output {out.ravel().tolist()} (LiteRT)")


def if_else() -> None:
    """An IF (cond ? x + c : x * x), the branches subgraphs 1 and 2: written with LiteRT's
    schema object API (no TensorFlow; converters lower tf.cond to IF only in larger graphs),
    the reference from LiteRT, for each value of the condition (``else_output_0`` for false)."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.interpreter import Interpreter

    S = schema
    c = np.array([[0.5, -1.0, 0.25, 2.0]], np.float32)

    def tensor(name, shape, type_=S.TensorType.FLOAT32, buffer=0):
        t = S.TensorT()
        t.name, t.shape, t.type, t.buffer = name, list(shape), type_, buffer
        return t

    def operator(code, inputs, outputs, options_type=0, options=None):
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = code, list(inputs), list(outputs)
        op.builtinOptionsType, op.builtinOptions = options_type, options
        return op

    def subgraph(name, tensors, inputs, outputs, operators):
        sg = S.SubGraphT()
        sg.name, sg.tensors, sg.inputs, sg.outputs, sg.operators = (
            name,
            tensors,
            inputs,
            outputs,
            operators,
        )
        return sg

    codes = []
    for builtin in (S.BuiltinOperator.IF, S.BuiltinOperator.ADD, S.BuiltinOperator.MUL):
        code = S.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = builtin
        code.version = 1
        codes.append(code)
    if_options = S.IfOptionsT()
    if_options.thenSubgraphIndex, if_options.elseSubgraphIndex = 1, 2
    add_options, mul_options = S.AddOptionsT(), S.MulOptionsT()
    main = subgraph(
        "main",
        [tensor("cond", [1], S.TensorType.BOOL), tensor("x", [1, 4]), tensor("y", [1, 4])],
        [0, 1],
        [2],
        [operator(0, [0, 1], [2], S.BuiltinOptions.IfOptions, if_options)],
    )
    then = subgraph(
        "then",
        [tensor("then_x", [1, 4]), tensor("c", [1, 4], buffer=1), tensor("then_y", [1, 4])],
        [0],
        [2],
        [operator(1, [0, 1], [2], S.BuiltinOptions.AddOptions, add_options)],
    )
    else_ = subgraph(
        "else",
        [tensor("else_x", [1, 4]), tensor("else_y", [1, 4])],
        [0],
        [1],
        [operator(2, [0, 0], [1], S.BuiltinOptions.MulOptions, mul_options)],
    )
    empty, const = S.BufferT(), S.BufferT()
    const.data = np.frombuffer(c.tobytes(), np.uint8)
    m = S.ModelT()
    m.version, m.description = 3, "nnhal test: IF"
    m.operatorCodes, m.subgraphs, m.buffers = codes, [main, then, else_], [empty, const]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    content = bytes(b.Output())
    x = np.random.default_rng(23).uniform(-1, 1, (1, 4)).astype(np.float32)
    outs = []
    for cond in (True, False):
        interp = Interpreter(model_content=content, num_threads=1)
        interp.allocate_tensors()
        ins = interp.get_input_details()
        interp.set_tensor(ins[0]["index"], np.array([cond]))
        interp.set_tensor(ins[1]["index"], x)
        interp.invoke()
        outs.append(interp.get_tensor(interp.get_output_details()[0]["index"]).copy())
    (HERE / "if_else.tflite").write_bytes(content)
    np.savez(
        HERE / "if_else.npz",
        input_0=np.array([True]),
        input_1=x,
        output_0=outs[0],
        else_output_0=outs[1],
    )
    print(f"if_else: {len(content)} bytes, outputs {[o.ravel().tolist() for o in outs]}")


#: the quantized CNNs whose every operator output is stored (NAME_tensors.npz)
PER_NODE = ["cnn_int8", "cnn_uint8_deep"]


def tensors() -> None:
    """Every operator's output in LiteRT for the stored inputs (``tensor_K``: TFLite tensor K),
    for the per-operator tests: an untrained deep quantized CNN's softmax is one value for
    every class, and one-step rounding differences add up over its layers (LiteRT's own
    XNNPACK and reference kernels differ by several steps at the logits), so the quantized
    kernels are checked operator by operator. Each output is made a model output so that
    XNNPACK writes it out; the arithmetic is unchanged."""
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.interpreter import Interpreter

    for name in PER_NODE:
        m = schema.ModelT.InitFromPackedBuf((HERE / f"{name}.tflite").read_bytes(), 0)
        sg = m.subgraphs[0]
        outputs = list(dict.fromkeys(int(t) for op in sg.operators for t in op.outputs))
        sg.outputs = outputs
        m.signatureDefs = []  # the signature names the original outputs only
        b = flatbuffers.Builder(1 << 16)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        interp = Interpreter(model_content=bytes(b.Output()), num_threads=1)
        interp.allocate_tensors()
        ref = np.load(HERE / f"{name}.npz")
        arrays = {}
        for k, d in enumerate(interp.get_input_details()):
            interp.set_tensor(d["index"], ref[f"input_{k}"])
            arrays[f"tensor_{int(sg.inputs[k])}"] = ref[f"input_{k}"]
        interp.invoke()
        for t, d in zip(outputs, interp.get_output_details()):
            arrays[f"tensor_{t}"] = interp.get_tensor(d["index"]).copy()
        np.savez_compressed(HERE / f"{name}_tensors.npz", **arrays)
        print(f"{name}_tensors: {len(arrays)} tensors")


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or [
        "cnn_float16",
        "cnn_int8",
        "cnn_dynamic_range",
        "lstm",
        "lstm_while",
        "while_loop",
        "cnn_uint8",
        "custom_op",
        "sparse_cnn",
        "sparse_block_fc",
        "cnn_large_float16",
        "cnn_uint8_deep",
        "tensors",
        "if_else",
    ]:
        globals()[name]()
