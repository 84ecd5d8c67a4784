"""ONNX's own backend node test cases (shipped in the `onnx` package) through ug.onnx.load on
all 9 targets and onnxruntime:static: a fixed subset, one to three cases for each op type
unigraph claims to import (the issue's list), each compared with the outputs ONNX's reference
gives, within the case's own rtol/atol. The full run, with pass rates per target:
`python -m unigraph.onnx.node_tests`.
"""

import dataclasses

import pytest
from conftest import FORWARD_TARGETS

from unigraph.onnx import node_tests

CLAIMED = {
    "Conv": ["test_conv_with_strides_and_asymmetric_padding", "test_conv_with_autopad_same"],
    "ConvTranspose": ["test_convtranspose_pads", "test_convtranspose_group_2"],
    "BatchNormalization": ["test_batchnorm_epsilon"],
    "Gemm": ["test_gemm_all_attributes"],
    "MatMul": ["test_matmul_4d_1d", "test_matmul_bcast"],
    "Add": ["test_add_bcast", "test_add_uint8"],
    "Sub": ["test_sub_bcast"],
    "Mul": ["test_mul_bcast"],
    "Div": ["test_div_int32_trunc"],
    "Pow": ["test_pow_types_int64_float32"],
    "Relu": ["test_relu"],
    "LeakyRelu": ["test_leakyrelu"],
    "PRelu": ["test_prelu_broadcast"],
    "Elu": ["test_elu"],
    "Selu": ["test_selu"],
    "Sigmoid": ["test_sigmoid"],
    "Tanh": ["test_tanh"],
    "Softplus": ["test_softplus"],
    "Erf": ["test_erf"],
    "Gelu": ["test_gelu_tanh_2", "test_gelu_default_2"],
    "Softmax": ["test_softmax_axis_0",
                # float16: tensorflow's own Softmax was 2 ulps off (quirk "softmax")
                "test_attention_4d_gqa_with_past_and_present_fp16_expanded"],
    "LogSoftmax": ["test_logsoftmax_large_number"],
    "MaxPool": ["test_maxpool_2d_ceil_output_size_reduce_by_one", "test_maxpool_2d_same_lower",
                "test_maxpool_2d_uint8"],
    "AveragePool": ["test_averagepool_2d_ceil_last_window_starts_on_pad",
                    "test_averagepool_2d_precomputed_pads_count_include_pad"],
    "GlobalAveragePool": ["test_globalaveragepool"],
    "GlobalMaxPool": ["test_globalmaxpool"],
    "LRN": ["test_lrn"],
    "Dropout": ["test_dropout_default_mask"],
    "Flatten": ["test_flatten_negative_axis1"],
    "Reshape": ["test_reshape_zero_and_negative_dim"],
    "Transpose": ["test_transpose_all_permutations_4"],
    "Squeeze": ["test_squeeze_negative_axes"],
    "Unsqueeze": ["test_unsqueeze_unsorted_axes",
                  # a 0-d axes input (and Range folded at import)
                  "test_affine_grid_2d_expanded"],
    "Concat": ["test_concat_3d_axis_negative_2"],
    "Split": ["test_split_variable_parts_2d_opset18", "test_split_1d_uneven_split_opset18"],
    "Slice": ["test_slice_negative_axes"],
    "Gather": ["test_gather_negative_indices"],
    "GatherElements": ["test_gather_elements_negative_indices"],
    "Pad": ["test_constant_pad_axes", "test_reflect_pad", "test_edge_pad"],
    "Clip": ["test_clip_splitbounds", "test_clip_default_int8_min"],
    "Where": ["test_where_long_example"],
    "Sum": ["test_sum_example"],
    "Mean": ["test_mean_example"],
    "Max": ["test_max_example"],
    "Min": ["test_min_int64"],
    "ReduceSum": ["test_reduce_sum_negative_axes_keepdims_random"],
    "ReduceMean": ["test_reduce_mean_do_not_keepdims_random"],
    "ReduceMax": ["test_reduce_max_keepdims_random"],
    "ReduceMin": ["test_reduce_min_empty_set"],
    "ReduceProd": ["test_reduce_prod_negative_axes_keepdims_random"],
    "Identity": ["test_identity"],
    "Constant": ["test_constant"],
    "ConstantOfShape": ["test_constantofshape_int_zeros"],
    "If": ["test_if"],
    "Cast": ["test_cast_FLOAT_to_DOUBLE", "test_cast_DOUBLE_to_FLOAT16"],
    "TopK": ["test_top_k_same_values_largest", "test_top_k_smallest",
             "test_top_k_negative_axis"],
    "InstanceNormalization": ["test_instancenorm_epsilon", "test_instancenorm_example"],
    "GroupNormalization": ["test_group_normalization_epsilon",
                           "test_group_normalization_example"],
    "EyeLike": ["test_eyelike_populate_off_main_diagonal", "test_eyelike_with_dtype",
                "test_eyelike_without_dtype"],
    "Swish": ["test_swish"],
    "Range": ["test_range_int32_type_negative_delta"],
    "CumSum": ["test_cumsum_1d_exclusive", "test_cumsum_1d_reverse",
               "test_cumsum_1d_reverse_exclusive"],
}
NAMES = {name for names in CLAIMED.values() for name in names}


@pytest.fixture(scope="module")
def selected():
    return [case for case in node_tests.cases() if case.name in NAMES]


def test_every_listed_case_ships_with_onnx_and_tests_its_op(selected):
    assert {case.name for case in selected} == NAMES
    for case in selected:
        op = next(op for op, names in CLAIMED.items() if case.name in names)
        assert op in node_tests.op_types_of(case.model), case.name


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_claimed_ops_node_cases_pass(selected, target):
    outcomes = [node_tests.run_case(case, target) for case in selected]
    failed = [f"{o.case}: {o.status} {o.detail}" for o in outcomes if o.status != "pass"]
    assert not failed, "\n".join(failed)


def test_a_wrong_result_fails_and_an_unknown_op_is_unsupported(selected):
    """The runner itself: a case whose expected output is perturbed fails; a case of an op
    with no importer is unsupported."""
    case = next(c for c in selected if c.name == "test_relu")
    inputs, outputs = case.data_sets[0]
    wrong = dataclasses.replace(case, data_sets=[(inputs, [outputs[0] + 1.0])])
    assert node_tests.run_case(wrong, "numpy:eager").status == "fail"
    other = next(c for c in node_tests.cases(["NonZero"]))
    assert node_tests.run_case(other, "numpy:eager").status == "unsupported"


def test_integer_data_is_fed_and_only_the_needed_integer_inputs_are_bound(selected):
    """An integer input that is data (Div's operands) is fed at run time, so the target
    computes it rather than ONNX's reference evaluator folding it at import; an integer input
    that the importer needs known (Reshape's shape, Slice's starts) is bound."""
    by_name = {case.name: case for case in selected}
    expected = {"test_div_int32_trunc": (), "test_reshape_zero_and_negative_dim": (1,),
                "test_slice_negative_axes": (1, 2, 3), "test_add_uint8": ()}
    for name, needed in expected.items():
        inputs = node_tests._arrays(by_name[name].data_sets[0][0])
        assert node_tests.needed_integer_inputs(by_name[name], inputs) == needed, name
