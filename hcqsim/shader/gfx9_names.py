"""GFX9 (gfx942) mnemonics -> the gfx11 mnemonics whose semantics the executor implements.

The two instruction sets mostly share operations under different names (s_andn2_b64 / s_and_not1_b64,
global_load_dword / global_load_b32, ds_read2_b32 / ds_load_2addr_b32, v_add_u32 / v_add_nc_u32). Where the
meaning differs (v_cmpx also writing VCC on GFX9, ds_cmpst's operand order) the executor handles the GFX9
form explicitly; this table only renames.
"""
from __future__ import annotations

import re

EXPLICIT = {
    # SALU
    "s_andn2_b32": "s_and_not1_b32", "s_andn2_b64": "s_and_not1_b64", "s_orn2_b32": "s_or_not1_b32",
    "s_orn2_b64": "s_or_not1_b64", "s_andn2_saveexec_b64": "s_and_not1_saveexec_b64",
    "s_orn2_saveexec_b64": "s_or_not1_saveexec_b64", "s_andn1_saveexec_b64": "s_and_not0_saveexec_b64",
    "s_orn1_saveexec_b64": "s_or_not0_saveexec_b64", "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64",
    "s_flbit_i32_b32": "s_clz_i32_u32", "s_flbit_i32_b64": "s_clz_i32_u64", "s_flbit_i32": "s_cls_i32",
    "s_flbit_i32_i64": "s_cls_i32_i64",
    # VALU
    "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
    "v_add_i32": "v_add_nc_i32", "v_sub_i32": "v_sub_nc_i32",
    "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32", "v_subbrev_co_u32": "v_subrev_co_ci_u32",
    "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16", "v_mul_lo_u16": "v_mul_lo_u16",
    "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32", "v_ffbh_i32": "v_cls_i32",
    "v_subrev_u16": "v_subrev_nc_u16", "v_cvt_pknorm_i16_f32": "v_cvt_pk_norm_i16_f32",
    "v_cvt_pknorm_u16_f32": "v_cvt_pk_norm_u16_f32", "v_cvt_pknorm_i16_f16": "v_cvt_pk_norm_i16_f16",
    "v_cvt_pknorm_u16_f16": "v_cvt_pk_norm_u16_f16", "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32",
    "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32", "v_cvt_rpi_i32_f32": "v_cvt_nearest_i32_f32", "v_add_i16": "v_add_nc_i16", "v_sub_i16": "v_sub_nc_i16",
    # the GFX9 "legacy" 16-bit forms zero the high half unless op_sel[3] (as all GFX9 16-bit results here do)
    "v_mad_legacy_u16": "v_mad_u16", "v_mad_legacy_i16": "v_mad_i16", "v_fma_legacy_f16": "v_fma_f16",
    "v_div_fixup_legacy_f16": "v_div_fixup_f16",
    # cache maintenance: no-ops in a coherent emulator
    "buffer_wbl2": "buffer_gl0_inv", "buffer_inv": "buffer_gl0_inv", "buffer_wbinvl1": "buffer_gl0_inv",
    "buffer_wbinvl1_vol": "buffer_gl0_inv",
}

_MEM_WIDTH = {"dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "dwordx8": "b256",
              "dwordx16": "b512", "ubyte": "u8", "sbyte": "i8", "ushort": "u16", "sshort": "i16", "byte": "b8",
              "short": "b16"}
_D16 = {"ubyte_d16": "d16_u8", "sbyte_d16": "d16_i8", "short_d16": "d16_b16", "ubyte_d16_hi": "d16_hi_u8",
        "sbyte_d16_hi": "d16_hi_i8", "short_d16_hi": "d16_hi_b16", "byte_d16_hi": "d16_hi_b8"}
_ATOMIC = {"add": "add_u32", "sub": "sub_u32", "swap": "swap_b32", "cmpswap": "cmpswap_b32", "smin": "min_i32",
           "umin": "min_u32", "smax": "max_i32", "umax": "max_u32", "and": "and_b32", "or": "or_b32",
           "xor": "xor_b32", "inc": "inc_u32", "dec": "dec_u32", "add_f32": "add_f32"}


def gfx11_name(name: str) -> str:
    """The gfx11 mnemonic with the same semantics as GFX9 `name` (unchanged when they share it)."""
    if name in EXPLICIT:
        return EXPLICIT[name]
    m = re.fullmatch(r"s_load_(dword(?:x\d+)?)", name)
    if m:
        return f"s_load_{_MEM_WIDTH[m.group(1)]}"
    m = re.fullmatch(r"(global|flat|scratch)_(load|store)_(\w+)", name)
    if m:
        seg, kind, what = m.groups()
        if what in _D16:
            return f"{seg}_{kind}_{_D16[what]}"
        if what in _MEM_WIDTH:
            return f"{seg}_{kind}_{_MEM_WIDTH[what]}"
    m = re.fullmatch(r"(global|flat)_atomic_(\w+?)(_x2)?", name)
    if m:
        seg, op, x2 = m.groups()
        base = _ATOMIC.get(op)
        if base is not None:
            return f"{seg}_atomic_{base.replace('32', '64') if x2 else base}"
    m = re.fullmatch(r"ds_(read|write)(2st64|2)?_(\w+)", name)
    if m:
        kind, two, typ = m.groups()
        verb = "load" if kind == "read" else "store"
        if two == "2":
            return f"ds_{verb}_2addr_{typ}"
        if two == "2st64":
            return f"ds_{verb}_2addr_stride64_{typ}"
        return f"ds_{verb}_{typ}"
    return name
