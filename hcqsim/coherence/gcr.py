"""Which cache actions a packet's cache-control bits ask for, by the model's names (GLV_INV, GL1_INV, GLK_INV,
GLI_INV, GL2_INV, GL2_WB, GL2_DISCARD), from the decoded field values (HARDWARE_FACTS 3.3 tables, 5.2 GCR_REQ).

Readings taken where the facts leave a choice (docs/memory_model.md): a range or "volatile lines only" qualifier
(GL2_RANGE, GLI_INV 2/3, GL1_RANGE, COHER_BASE/SIZE, TCL1_VOL, TC_VOL, TC_NC, TC_WC) acts on everything (more
flushing: fewer programs wrong); GLM_* and TC_MD (metadata) and GLK_WB / SH_KCACHE_WB (no scalar stores) change
nothing the model holds; SEQ is always forward (write-back before invalidates).
"""
from __future__ import annotations

# gfx11 GCR bits (RELEASE_MEM dw1, ACQUIRE_MEM dw7, SDMA GCR_REQ): field -> action
_GCR = {"glv_inv": "GLV_INV", "gl1_inv": "GL1_INV", "glk_inv": "GLK_INV", "gl2_inv": "GL2_INV", "gl2_wb": "GL2_WB",
        "gl2_discard": "GL2_DISCARD"}
# gfx9 RELEASE_MEM EOP bits
_EOP9 = {"tcl1_action_ena": "GLV_INV", "tcl1_vol_action_ena": "GLV_INV", "tc_action_ena": "GL2_INV",
         "tc_wb_action_ena": "GL2_WB"}
# gfx9 ACQUIRE_MEM CP_COHER_CNTL bits
_COHER9 = {"tcl1_action_ena": "GLV_INV", "tcl1_vol_action_ena": "GLV_INV", "tc_action_ena": "GL2_INV",
           "tc_wb_action_ena": "GL2_WB", "sh_kcache_action_ena": "GLK_INV", "sh_kcache_vol_action_ena": "GLK_INV",
           "sh_icache_action_ena": "GLI_INV"}


def _set(values: dict, table: dict) -> set[str]:
    return {action for field, action in table.items() if values.get(field)}


def gcr_cntl(values: dict) -> set[str]:
    """GCR_CNTL (ACQUIRE_MEM dw7 on gfx11, SDMA GCR_REQ): GLI_INV is two bits (any nonzero: the whole I$)."""
    ops = _set(values, _GCR)
    if values.get("gli_inv"):
        ops.add("GLI_INV")
    return ops


def release(values: dict, family: str) -> set[str]:
    """RELEASE_MEM dw1 cache bits (performed at end of pipe, before the data write)."""
    return _set(values, _GCR) if family == "gfx11" else _set(values, _EOP9)


def acquire(values: dict, family: str) -> set[str]:
    """ACQUIRE_MEM: GCR_CNTL on gfx11, CP_COHER_CNTL on gfx9."""
    return gcr_cntl(values) if family == "gfx11" else _set(values, _COHER9)


# EVENT_WRITE cache events (no facts on their compute-cache effect; the weaker reading: a flush writes GL2 back,
# a flush-and-invalidate also invalidates the vector levels and GL2)
EVENTS = {"CACHE_FLUSH": {"GL2_WB"}, "CACHE_FLUSH_AND_INV_EVENT": {"GL2_WB", "GL2_INV", "GLV_INV", "GL1_INV"}}
