#!/usr/bin/env bash
# bench/profile_breakdown.py turns nsys's kernel summaries in CSV (newer and older column names,
# with the lines nsys prints before the table), or ncu's raw page of every launch's duration,
# into GPU kernel time per step by category, side by side and against a baseline, with each
# category's longest kernels; it refuses a file that holds no kernel summary, naming it; and
# every __global__ kernel of kernels/*.cu lands in a category of its own, never "other". Needs
# neither a GPU nor a build.
source "$(dirname "$0")/lib.sh"
breakdown=$RDDP_SOURCE_DIR/bench/profile_breakdown.py
python=$("$RDDP_SOURCE_DIR/scripts/find_python.sh" csv dataclasses) ||
  { echo "SKIPPED: no python3"; exit 77; }

# Ours in NCHW with cuDNN's BatchNorm, as nsys 2024 prints cuda_gpu_kern_sum --format csv: its
# progress lines first, every field quoted, demangled names with their parameter lists. Totals
# over 10 steps, so that 45,000,000 ns is 4.500 ms a step.
cat >"$work/ours.csv" <<'CSV'
Generating SQLite file /tmp/logs/profile-resnet_ddp-nchw.sqlite from /tmp/logs/profile-resnet_ddp-nchw.nsys-rep
Processing [/tmp/logs/profile-resnet_ddp-nchw.sqlite] with [/opt/nvidia/nsight-systems/2024.5.1/host-linux-x64/reports/cuda_gpu_kern_sum.py]... 

 ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):

"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
"21.8","45000000","160","281250.0","281000.0","270000","290000","1000.0","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn"
"19.4","40000000","150","266666.7","266000.0","260000","270000","1000.0","void cudnn::bn_bw_1C11_kernel_new<__nv_bfloat16, float, float2, 128, 0, 3>(float, float, float, float, cudnnTensorStruct, const T1 *, cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const T2 *, T2 *, T2 *, const T2 *, const T2 *, T2)"
"18.4","38000000","200","190000.0","190000.0","180000","200000","1000.0","sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn"
"16.9","35000000","150","233333.3","233000.0","230000","240000","1000.0","sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn"
"14.5","30000000","200","150000.0","150000.0","140000","160000","1000.0","void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, int, 128, 0, 2, 1>(cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const T2 *, const T2 *, T2, T2, T2 *, T2 *, T2 *, T2 *, T2, T2)"
"4.3","8910000","390","22846.2","22800.0","20000","25000","100.0","void rddp::cuda::(anonymous namespace)::relu_backward_kernel<__nv_bfloat16>(long, const T1 *, const T1 *, T1 *)"
"1.0","2000000","80","25000.0","25000.0","24000","26000","100.0","void rddp::cuda::(anonymous namespace)::add_relu_kernel<__nv_bfloat16>(long, const T1 *, const T1 *, T1 *)"
"1.0","2000000","40","50000.0","50000.0","49000","51000","100.0","void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"
"0.7","1520000","10","152000.0","152000.0","150000","154000","100.0","void rddp::cuda::(anonymous namespace)::weights_to_ohwi_kernel<__nv_bfloat16>(const rddp::cuda::(anonymous namespace)::WeightPermutation *, const float *, T1 *)"
"0.7","1500000","10","150000.0","150000.0","149000","151000","100.0","void rddp::cuda::(anonymous namespace)::maxpool_forward_kernel<__nv_bfloat16, false>(rddp::cuda::(anonymous namespace)::Window, int, long, rddp::cuda::(anonymous namespace)::PoolInput<T1, T2>, T1 *, unsigned char *)"
"0.5","1100000","10","110000.0","110000.0","109000","111000","100.0","void rddp::cuda::(anonymous namespace)::adamw_kernel<__nv_bfloat16, true>(float *, const T1 *, float *, float *, rddp::cuda::ParamCopy16, unsigned long, unsigned long, const rddp::cuda::adamw::Scalars<float> *, bool)"
"0.3","600000","30","20000.0","20000.0","19000","21000","100.0","sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
"0.2","500000","15","33333.3","33000.0","32000","34000","100.0","cudnn::gemm::computeWgradSplitKOffsetsKernel(cudnn::gemm::ComputeOffsetsParams)"
"0.1","200000","10","20000.0","20000.0","19000","21000","100.0","void rddp::cuda::(anonymous namespace)::softmax_xent_rows<__nv_bfloat16, float>(const T1 *, const int *, int, rddp::cuda::xent::Params<T2>, T1 *, rddp::cuda::XentRow *)"
"0.0","100000","10","10000.0","10000.0","9000","11000","100.0","void rddp::cuda::(anonymous namespace)::global_avgpool_backward_kernel<__nv_bfloat16>(long, int, const T1 *, T1 *)"
"0.0","100000","10","10000.0","10000.0","9000","11000","100.0","void gemv2N_kernel<int, int, float, float, float, float, 128, 32, 4, 4, false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>, float>>(T13)"
"0.0","50000","10","5000.0","5000.0","4000","6000","100.0","void cudnn::ops::scalePackedTensor_kernel<float, float>(cudnnTensor4dStruct, T1 *, T2)"

CSV

# torch.compile's, in an older nsys's gpukernsum columns (Time(%), Total Time without a unit,
# Calls), quoted only where a field needs it, one total with thousands separators.
cat >"$work/compile.csv" <<'CSV'
Processing [/tmp/logs/profile-pytorch-compile.sqlite] with [/opt/nvidia/nsight-systems/2021.3.3/host-linux-x64/reports/gpukernsum.py]... 
Time(%),Total Time,Calls,Average,Minimum,Maximum,Name
27.9,44000000,160,275000.0,270000,280000,sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn
23.4,37000000,200,185000.0,180000,190000,sm90_xmma_wgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn
21.5,"34,000,000",150,226666.7,220000,230000,sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn
12.7,20000000,100,200000.0,190000,210000,triton_red_fused__native_batch_norm_legit_functional_0
9.5,15000000,100,150000.0,140000,160000,triton_poi_fused__native_batch_norm_legit_functional_add_relu_1
1.9,3000000,80,37500.0,37000,38000,triton_poi_fused_threshold_backward_5
1.0,1500000,100,15000.0,14000,16000,"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(T1, T2, T3, T4...)"
0.6,1000000,10,100000.0,99000,101000,triton_poi_fused_max_pool2d_with_indices_2
0.6,1000000,10,100000.0,99000,101000,triton_poi_fused__to_copy_6
0.3,500000,20,25000.0,24000,26000,"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)], at::detail::Array<char *, 2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>>(int, T1, T2, T3, T4, T5, T6)"
0.2,300000,20,15000.0,14000,16000,nvjet_tst_64x8_64x16_4x1_v_bz_TNT
0.1,200000,10,20000.0,19000,21000,triton_per_fused_mean_3
0.1,100000,10,10000.0,9000,11000,"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4>>(T3)"
0.1,100000,10,10000.0,9000,11000,triton_per_fused_sum_7
0.1,100000,10,10000.0,9000,11000,triton_per_fused__log_softmax_nll_loss_forward_8
CSV

# section FILE FIRST_LINE: FILE's lines from FIRST_LINE (exactly) to the next blank line.
section() {
  awk -v first="$2" '$0 == first { inside = 1 } inside && $0 == "" { exit } inside' "$1"
}
# same_lines WHAT EXPECTED_FILE ACTUAL_FILE: the two hold the same lines, else the diff.
same_lines() {
  diff -u "$2" "$3" >"$work/diff" || { cat "$work/diff" >&2; failed "$1"; }
  checks=$((checks + 1))
  echo "ok $checks: $1"
}
has_line() { check "$1" grep -qxF -- "$2" "$3"; }

expect 0 "^wrote $work/report.md and $work/tables.md$" -- "$python" "$breakdown" --steps 10 \
  --output "$work/report.md" --table-output "$work/tables.md" \
  resnet_ddp-nchw="$work/ours.csv" pytorch-compile="$work/compile.csv"

# Worked out by hand from the totals above, divided by 10 steps: BatchNorm 40 + 30 ms over 10
# steps, 7.000 ms a step, 33.9 % of 206.58 ms; the wgrad's split-K offsets kernel joins the
# wgrad; nchwToNhwc and our weight permutation are layout; cuDNN's scalePackedTensor is "other".
cat >"$work/expected-categories" <<'TABLE'
| category | resnet_ddp-nchw | pytorch-compile |
| --- | ---: | ---: |
| convolution forward | 4.500 (21.8 %) | 4.400 (27.9 %) |
| convolution backward data | 3.500 (16.9 %) | 3.400 (21.5 %) |
| convolution backward filter | 3.850 (18.6 %) | 3.700 (23.4 %) |
| GEMM (fc layer) | 0.070 (0.3 %) | 0.030 (0.2 %) |
| BatchNorm | 7.000 (33.9 %) | 3.500 (22.2 %) |
| pooling | 0.160 (0.8 %) | 0.120 (0.8 %) |
| loss (softmax, cross-entropy, metrics) | 0.020 (0.1 %) | 0.010 (0.1 %) |
| optimizer (and loss scaling) | 0.110 (0.5 %) | 0.150 (1.0 %) |
| casts and layout | 0.352 (1.7 %) | 0.150 (1.0 %) |
| elementwise (ReLU, add) | 1.091 (5.3 %) | 0.300 (1.9 %) |
| reductions and other Triton | 0.000 (0.0 %) | 0.020 (0.1 %) |
| other | 0.005 (0.0 %) | 0.000 (0.0 %) |
| **all kernels** | **20.658** | **15.780** |
| kernel launches | 148.5 | 99 |
TABLE
section "$work/report.md" "| category | resnet_ddp-nchw | pytorch-compile |" >"$work/categories"
same_lines "ms per step and share by category, both CSV variants" \
  "$work/expected-categories" "$work/categories"

cat >"$work/expected-differences" <<'TABLE'
| category | pytorch-compile - resnet_ddp-nchw |
| --- | ---: |
| convolution forward | -0.100 |
| convolution backward data | -0.100 |
| convolution backward filter | -0.150 |
| GEMM (fc layer) | -0.040 |
| BatchNorm | -3.500 |
| pooling | -0.040 |
| loss (softmax, cross-entropy, metrics) | -0.010 |
| optimizer (and loss scaling) | +0.040 |
| casts and layout | -0.202 |
| elementwise (ReLU, add) | -0.791 |
| reductions and other Triton | +0.020 |
| other | -0.005 |
| **all kernels** | **-4.878** |
| kernel launches | -49.5 |
TABLE
section "$work/report.md" "| category | pytorch-compile - resnet_ddp-nchw |" >"$work/differences"
same_lines "differences against the first program by default" \
  "$work/expected-differences" "$work/differences"

# The category tables alone, for a summary to embed: the same two tables, no kernel lists.
section "$work/tables.md" "| category | resnet_ddp-nchw | pytorch-compile |" >"$work/categories"
same_lines "--table-output holds the category table" "$work/expected-categories" "$work/categories"
check "--table-output holds the differences" grep -qxF "| BatchNorm | -3.500 |" "$work/tables.md"
check "--table-output leaves out the kernel lists" bash -c '! grep -q "longest kernels" "$1"' _ \
  "$work/tables.md"

# Each category's longest kernels: names without return type, parameters and our namespaces;
# launches per step may be fractional (15 launches over 10 steps).
report=$work/report.md
has_line "cuDNN's BatchNorm backward: 4.000 ms, 15 launches, 266.7 us each" \
  '| resnet_ddp-nchw | 4.000 | 15 | 266.7 | `cudnn::bn_bw_1C11_kernel_new<__nv_bfloat16, float, float2, 128, 0, 3>` |' \
  "$report"
has_line "our ReLU backward, its namespaces dropped" \
  '| resnet_ddp-nchw | 0.891 | 39 | 22.8 | `relu_backward_kernel<__nv_bfloat16>` |' "$report"
has_line "a split-K wgrad helper under the wgrad, 1.5 launches a step" \
  '| resnet_ddp-nchw | 0.050 | 1.5 | 33.3 | `cudnn::gemm::computeWgradSplitKOffsetsKernel` |' "$report"
has_line "Inductor's BatchNorm reduction" \
  '| pytorch-compile | 2.000 | 10 | 200.0 | `triton_red_fused__native_batch_norm_legit_functional_0` |' \
  "$report"
check "a long PyTorch name is cut at 90 characters, keeping its lambda's parentheses" \
  grep -qF '| pytorch-compile | 0.050 | 2 | 25.0 | `unrolled_elementwise_kernel<direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(...` |' \
  "$report"
check "the kernel lists name their category" grep -qxF "### convolution backward filter" "$report"

# Against torch.compile, listing one kernel per category: where ours spends more is positive.
expect 0 "^\| BatchNorm \| \+3\.500 \|$" -- "$python" "$breakdown" --steps 10 --top 1 \
  --baseline pytorch-compile resnet_ddp-nchw="$work/ours.csv" pytorch-compile="$work/compile.csv"
has_line "--baseline names the difference's columns" \
  "| category | resnet_ddp-nchw - pytorch-compile |" "$work/out"
has_line "--baseline: the total against torch.compile's" "| **all kernels** | **+4.878** |" \
  "$work/out"
has_line "--baseline: launches against torch.compile's" "| kernel launches | +49.5 |" "$work/out"
has_line "--top 1 sums up the kernels it leaves out" \
  "| resnet_ddp-nchw | 3.000 | 20 |  | (1 more kernel) |" "$work/out"

# Nsight Compute's raw page (ncu --import --csv --page raw), where a machine has no nsys: one
# row per launch, after ncu's own lines and a row of units; summed by kernel here. In usecond
# (ncu's default units), 2 steps: the fprop 2 x 1,500 us and our normalize 4 x 500 us.
cat >"$work/ncu.csv" <<'CSV'
==PROF== Connected to process 4242 (/tmp/build/bench/cuda_step_bench)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum"
"","","","","","","","","","","","usecond"
"0","4242","cuda_step_bench","h","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","1,500.00"
"1","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","500.00"
"2","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","500.00"
"3","4242","cuda_step_bench","h","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","1,500.00"
"4","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","500.00"
"5","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","500.00"
CSV
expect 0 "^\| BatchNorm \| 1\.000 \(40\.0 %\) \|$" -- "$python" "$breakdown" --steps 2 \
  ours-ncu="$work/ncu.csv"
has_line "ncu's launches summed by kernel: 1.5 ms of fprop a step" \
  "| convolution forward | 1.500 (60.0 %) |" "$work/out"
has_line "one launch a row: 3 a step" "| kernel launches | 3 |" "$work/out"
has_line "each kernel's launches and mean duration" \
  '| ours-ncu | 1.000 | 2 | 500.0 | `normalize_kernel<__nv_bfloat16, true, 8>` |' "$work/out"
# In base units (--print-units base, as scripts/gpu_check.sh asks): nanoseconds.
sed 's/"usecond"/"nsecond"/; s/"1,500.00"$/"1500000"/; s/"500.00"$/"500000"/' "$work/ncu.csv" \
  >"$work/ncu-ns.csv"
expect 0 "^\| convolution forward \| 1\.500 \(60\.0 %\) \|$" -- "$python" "$breakdown" \
  --steps 2 ours-ncu="$work/ncu-ns.csv"
sed '/usecond/d; s/"1,500.00"$/"1500000"/; s/"500.00"$/"500000"/' "$work/ncu.csv" \
  >"$work/ncu-no-units.csv"
expect 0 "^\| convolution forward \| 1\.500 \(60\.0 %\) \|$" -- "$python" "$breakdown" \
  --steps 2 ours-ncu="$work/ncu-no-units.csv"
sed 's/"usecond"/"cycle"/' "$work/ncu.csv" >"$work/ncu-cycles.csv"
expect 1 "^profile_breakdown.py: $work/ncu-cycles.csv line 3: unknown unit 'cycle' of gpu__time_duration.sum" \
  -- "$python" "$breakdown" --steps 2 ours="$work/ncu-cycles.csv"
head -3 "$work/ncu.csv" >"$work/ncu-empty.csv"
expect 1 "^profile_breakdown.py: $work/ncu-empty.csv line 2: ncu's table has a header but no launches" \
  -- "$python" "$breakdown" --steps 2 ours="$work/ncu-empty.csv"

# ncu's details page (its CSV without --page raw): a row per metric and launch, each with its
# unit; only gpu__time_duration.sum counts. The same launches as above.
cat >"$work/ncu-details.csv" <<'CSV'
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","cuda_step_bench","h","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","1.50"
"0","4242","cuda_step_bench","h","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,048,576"
"1","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,000.00"
"2","4242","cuda_step_bench","h","sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_kernel__5x_cudnn","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1500000"
"3","4242","cuda_step_bench","h","void rddp::cuda::(anonymous namespace)::normalize_kernel<__nv_bfloat16, true, 8>(int, const T1 *)","1","7","(256, 1, 1)","(64, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,000.00"
CSV
expect 0 "^\| convolution forward \| 1\.500 \(60\.0 %\) \|$" -- "$python" "$breakdown" \
  --steps 2 ours-ncu="$work/ncu-details.csv"
has_line "ncu's details page: only the duration rows count, each in its own unit" \
  "| BatchNorm | 1.000 (40.0 %) |" "$work/out"
has_line "ncu's details page: one launch per duration row" "| kernel launches | 2 |" "$work/out"

# Files that are no kernel summary, and bad arguments: a clear error naming the file.
cat >"$work/columns.txt" <<'TEXT'
 ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):

 Time (%)  Total Time (ns)  Instances  Avg (ns)   Name
 --------  ---------------  ---------  ---------  ------------------
     60.0       45,000,000        160  281,250.0  sm90_xmma_fprop_implicit_gemm
TEXT
expect 1 "^profile_breakdown.py: $work/columns.txt: no kernel summary table in it: .*--format csv" \
  -- \
  "$python" "$breakdown" --steps 10 ours="$work/columns.txt"
printf '%s\n' "Processing [x.sqlite] with [cuda_gpu_kern_sum.py]..." \
  "SKIPPED: x.sqlite does not contain CUDA kernel data." >"$work/empty.csv"
expect 1 "$work/empty.csv: no kernel summary table in it: .*holds no CUDA kernels" -- \
  "$python" "$breakdown" --steps 10 ours="$work/empty.csv"
sed '3s/,44000000,/,n\/a,/' "$work/compile.csv" >"$work/not-a-number.csv"
expect 1 "^profile_breakdown.py: $work/not-a-number.csv line 3: 'Total Time' is 'n/a', not a" \
  -- \
  "$python" "$breakdown" --steps 10 ours="$work/ours.csv" compile="$work/not-a-number.csv"
sed '4s/,200,/,/' "$work/compile.csv" >"$work/short-row.csv"
expect 1 "^profile_breakdown.py: $work/short-row.csv line 4: 6 fields where the header has 7" -- \
  "$python" "$breakdown" --steps 10 compile="$work/short-row.csv"
expect 1 "^profile_breakdown.py: $work/missing.csv: cannot read it" -- \
  "$python" "$breakdown" --steps 10 ours="$work/missing.csv"
expect 2 "--steps N is needed" -- "$python" "$breakdown" ours="$work/ours.csv"
expect 2 "'ours.csv' is not NAME=CSV" -- "$python" "$breakdown" --steps 10 ours.csv
expect 2 "--baseline eager: no such program; the programs are ours, compile" -- \
  "$python" "$breakdown" --steps 10 --baseline eager ours="$work/ours.csv" \
  compile="$work/compile.csv"

rm -f "$work/out"  # a failure below has no command output of its own to show

# Kernel names as nsys, Nsight Compute and the profiles so far print them, with their categories
# (regular-expression order matters: Inductor's fused BatchNorm with a mean is BatchNorm, a
# pure cast is a cast, not an elementwise kernel).
cat >"$work/expected-classes" <<'NAMES'
convolution forward	sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn
convolution forward	void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_64x3_nhwc_align8>(T1::Params)
convolution forward	void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true, false, true>(int, int, int, const float *, int, float *, const float *, kernel_conv_params, unsigned long long, int, float, float, int, const float *, const float *, bool, int, int)
convolution forward	cudnn::gemm::computeOffsetsKernel(cudnn::gemm::ComputeOffsetsParams)
convolution backward data	sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cudnn
convolution backward data	void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, const float *, int, const float *, int, float *, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, int, int)
convolution backward filter	sm80_xmma_wgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel_cudnn
convolution backward filter	cudnn::gemm::computeWgradSplitKOffsetsKernel(cudnn::gemm::ComputeOffsetsParams)
convolution backward filter	cudnn::gemm::computeWgradBOffsetsKernel(cudnn::gemm::ComputeBOffsetsParams)
convolution backward filter	void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, const float *, int, float *, const float *, kernel_grad_params, unsigned long long, int, float, int, int, int, int)
GEMM (fc layer)	sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas
GEMM (fc layer)	ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x3_nn
GEMM (fc layer)	nvjet_hsh_128x64_64x4_1x2_h_bz_coopA_NTT
GEMM (fc layer)	void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>, float>>(T13, T6, T6)
GEMM (fc layer)	void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(cublasSplitKParams<T6>, const T4 *, const T5 *, T5 *, const T6 *, const T6 *, const T7 *, const T4 *, T7 *, void *, long, T6 *, int *)
BatchNorm	void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float, int, 128, 0, 2, 1>(cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const T2 *, const T2 *, T2, T2, T2 *, T2 *, T2 *, T2 *, T2, T2)
BatchNorm	cudnn::bn_bw_1C11_kernel_new<__nv_bfloat16, float, float2, 32, 0, 3>
BatchNorm	void cudnn::bn_fw_tr_1C11_singleread<__nv_bfloat16, 512, 0, 2, 2, 0>(cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const float *, const float *, float, float, float *, float *, float *, float *, float, float)
BatchNorm	void cudnn::bn_bw_1C11_singleread<__nv_bfloat16, 512, 0, 3, 2, 0>(float, float, float, float, cudnnTensorStruct, const T1 *, cudnnTensorStruct, const T1 *, cudnnTensorStruct, T1 *, const float *, float *, float *, const float *, const float *, float)
BatchNorm	void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, c10::BFloat16, float, 4>(const T2 *, T3 *, T3 *, volatile T3 *, int *, int, int, double)
BatchNorm	triton_red_fused__native_batch_norm_legit_functional_0
BatchNorm	triton_per_fused__native_batch_norm_legit_functional_add_mean_relu_threshold_backward_9
BatchNorm	triton_poi_fused_native_batch_norm_backward_threshold_backward_4
pooling	void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::BFloat16, float>(int, const T1 *, long, long, long, int, int, int, int, int, int, int, int, int, int, T1 *, long *)
pooling	void at::native::(anonymous namespace)::max_pool_backward_nhwc<c10::BFloat16, float>(const T1 *, const long *, int, long, long, long, int, int, int, int, int, int, int, int, int, int, int, int, T1 *)
pooling	void at::native::(anonymous namespace)::adaptive_average_pool<float>(const T1 *, T1 *, int, int, int, int, long, long, long)
pooling	void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<float, float, float, float>, unsigned int, c10::BFloat16, 4>>(T3)
pooling	triton_poi_fused_max_pool2d_with_indices_max_pool2d_with_indices_backward_7
pooling	triton_per_fused_mean_relu_3
loss (softmax, cross-entropy, metrics)	void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(T3 *, const T1 *, int)
loss (softmax, cross-entropy, metrics)	void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(T1 *, T1 *, const T1 *, const T3 *, const T1 *, bool, long, long, long, long)
loss (softmax, cross-entropy, metrics)	triton_poi_fused__log_softmax__log_softmax_backward_data_nll_loss_backward_nll_loss_forward_10
optimizer (and loss scaling)	void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double *, double, double, double, double, double, bool, const float *, const float *>(T1, T2, T3...)
optimizer (and loss scaling)	void at::native::amp_update_scale_cuda_kernel(float *, int *, const float *, double, double, int)
casts and layout	void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 10)]::operator ()() const::[lambda(float) (instance 1)], at::detail::Array<char *, 2>>(int, T2, T3)
casts and layout	triton_poi_fused__to_copy_3
casts and layout	triton_poi_fused__to_copy_convolution_0
casts and layout	void cudnn::engines_precompiled::nhwcToNchwKernel<__nv_bfloat16, __nv_bfloat16, float, true, false, (cudnnKernelDataType_t)2>(cudnn::engines_precompiled::nhwc2nchw_params_t<T3>, const T1 *, T2 *)
elementwise (ReLU, add)	void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase &, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 10)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], at::detail::Array<char *, 2>>(int, T2, T3)
elementwise (ReLU, add)	void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char *, 3>>(int, T2, T3)
elementwise (ReLU, add)	triton_poi_fused__to_copy_add_relu_threshold_backward_11
reductions and other Triton	triton_red_fused_sum_12
reductions and other Triton	void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4>>(T3)
other	void cudnn::ops::scalePackedTensor_kernel<float, float>(cudnnTensor4dStruct, T1 *, T2)
other	ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096UL>)
NAMES
cut -f2 "$work/expected-classes" | "$python" "$breakdown" --classify >"$work/classes"
same_lines "cuDNN's, cuBLAS's, PyTorch's and Inductor's kernels in their categories" \
  "$work/expected-classes" "$work/classes"

# Every __global__ function of kernels/*.cu, found in the sources (a __launch_bounds__ may stand
# between "void" and the name), so that a new kernel without a category fails here.
"$python" - "$RDDP_SOURCE_DIR"/kernels/*.cu >"$work/our-kernels" <<'PY'
import os
import re
import sys

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as source:
        text = source.read()
    text = re.sub(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", "", text)
    for name in re.findall(r"__global__\s+(?:[\w:<>]+\s+)*?(\w+)\s*\(", text):
        print(f"{os.path.basename(path)}\t{name}")
PY
declared=$(cat "$RDDP_SOURCE_DIR"/kernels/*.cu | grep -o '__global__' | wc -l)
found=$(wc -l <"$work/our-kernels")
check "a name for each of the $declared __global__ in kernels/*.cu: $found" \
  [ "$found" -eq "$declared" ] && [ "$declared" -gt 0 ]
# As nsys names them (demangled, in their namespaces, with parameters) and as Nsight Compute's
# summaries do (the bare name and template arguments): both must land in the same category.
in_nsys_form='s/.*/void rddp::cuda::(anonymous namespace)::&<__nv_bfloat16, true>(long, T1 *)/'
cut -f2 "$work/our-kernels" | sed "$in_nsys_form" | "$python" "$breakdown" --classify | cut -f1 \
  >"$work/nsys-classes"
cut -f2 "$work/our-kernels" | sed 's/$/<float>/' | "$python" "$breakdown" --classify | cut -f1 \
  >"$work/ncu-classes"
same_lines "our kernels' categories do not depend on how the profiler prints the name" \
  "$work/nsys-classes" "$work/ncu-classes"
# expected_category FILE NAME: the category each file's kernels belong in.
expected_category() {
  case $1:$2 in
    elementwise.cu:convert_kernel) echo "casts and layout" ;;
    elementwise.cu:*) echo "elementwise (ReLU, add)" ;;
    batchnorm.cu:*) echo "BatchNorm" ;;
    maxpool.cu:* | global_avgpool.cu:*) echo "pooling" ;;
    softmax_xent.cu:* | metrics.cu:*) echo "loss (softmax, cross-entropy, metrics)" ;;
    optimizer_kernels.cu:* | loss_scaling.cu:*) echo "optimizer (and loss scaling)" ;;
    bf16_cast.cu:* | layout.cu:*) echo "casts and layout" ;;
    *) echo "any but other" ;;
  esac
}
mismatches=$(paste "$work/our-kernels" "$work/nsys-classes" |
  while IFS=$'\t' read -r file name got; do
    want=$(expected_category "$file" "$name")
    if [ "$got" = other ] || { [ "$want" != "any but other" ] && [ "$got" != "$want" ]; }; then
      echo "$file $name: $got, expected $want"
    fi
  done)
check "every kernel of kernels/*.cu in its category, none in other${mismatches:+: $mismatches}" \
  [ -z "$mismatches" ]
finish
