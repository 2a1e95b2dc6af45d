#!/usr/bin/env bash
# session 13, call 1: the norm-shaped producer and the .pdl wgmma rows' L2 prefetch (A/B: pf0 off, pf48)
W="blaslt,gated.blaslt,wgmma.m64.t4.s1,wgmma.m64.t4.s1.pdl,wgmma.m64.t4.s2,wgmma.m64.t4.s2.pdl,wgmma.m128.t4.s1,wgmma.m128.t4.s1.pdl,gated.wgmma.m64.t4.s1,gated.wgmma.m64.t4.s1.pdl,gated.wgmma.m256.t4.s1,gated.wgmma.m256.t4.s1.pdl"
R="--rows 16,32,64,128 --candidates $W"
SMALL="--shapes 4096x2048,2048x2048,2048x6144,1024x2048,4096x1024,2560x4096,6144x2560 $R"
export VARIANTS="pf0:-DKP_WG_L2PF=0;pf48:-DKP_WG_L2PF=48"
export SWEEPS="--model Llama-3.1-8B;@pf0 --model Llama-3.1-8B $R;@pf48 --model Llama-3.1-8B $R;--model Qwen3-8B;@pf0 --model Qwen3-8B $R;$SMALL;@pf0 $SMALL;@pf48 $SMALL"
export CHECKS="this:wgmma.m128.t4.s1.pdl:Llama-3.1-8B:2:32;this:gated.wgmma.m256.t4.s1.pdl:Llama-3.1-8B:2:64;this:wgmma.m64.t4.s1.pdl:Qwen3-0.6B:3:17;this:gated.wgmma.m64.t4.s1.pdl:Qwen3-0.6B:3:5:fp16"
export BUDGET_S=${BUDGET_S:-400}
bash bench/gpu/wgmma-dev.sh
