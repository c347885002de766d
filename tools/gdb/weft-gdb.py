# tools/gdb/weft-gdb.py - gdb commands for weft's user-level threads.
#
#   info weft-threads          every live weft thread: id, name, state, VP, what
#                              it waits on (object kind and address, or the
#                              thread it joins)
#   weft-thread ID|NAME        one thread's line
#   weft-thread ID|NAME bt [full]
#                              the backtrace of a parked thread, from the context
#                              saved when it was switched away (src/arch/context.h
#                              frame layouts, x86-64 and AArch64), live process or
#                              core file: a frame unwinder presents that context as
#                              the caller of frame #0, `bt` runs, and the frames from
#                              #1 on are printed, renumbered from #0. Nothing is
#                              written to the process. (A gdb without Python
#                              unwinders, live processes only: the registers are
#                              switched to the context for `bt` and put back.)
#   weft-thread ID|NAME select
#                              keeps that unwinder on (live process or core): frame
#                              #0 stays the kernel thread's own, frames #1 and on are
#                              the weft thread's, so `bt`, `frame N`, `up`, `info
#                              locals` work on them
#   weft-thread none           turns it off again
#
# Installed as <prefix>/share/gdb/auto-load/<real libdir>/libweft.so.<version>-gdb.py,
# which gdb loads with the library when that auto-load directory is gdb's own (a /usr
# install) or added with add-auto-load-scripts-directory, and trusted
# (add-auto-load-safe-path): docs/debugging.md. Self-contained: it imports nothing but
# gdb's modules, so the installed copy works wherever it lies. Or load it by hand:
# (gdb) source tools/gdb/weft-gdb.py
#
# It reads the runtime's structures through the debug information of libweft (or
# of a program linked with weft statically): weft__rt, its VPs, the main thread and
# the slabs of control blocks (src/core/alloc.c, src/core/internal.h). The
# reading mirrors weft_dump (src/diag/dump.c); docs/debugging.md shows a session.
import re

import gdb

SLAB_HEADER = 64  # WEFT__SLAB_HEADER: one cache line (src/core/alloc.c)
JW_DETACHED, JW_DONE, JW_WEFT, JW_FREED, JW_JOINED = 1, 2, 3, 5, 6
KINDS = {1: "mutex", 2: "condition", 3: "semaphore", 4: "rwlock", 5: "future",
         6: "sleep", 7: "barrier"}


def _rt():
    try:
        return gdb.parse_and_eval("weft__rt")
    except gdb.error:
        raise gdb.GdbError("weft: no symbol weft__rt (libweft not loaded, or no debug info)")


def _u(v):
    return int(v.cast(gdb.lookup_type("unsigned long")))


def _name(t):
    raw = t["name"]
    n = raw.type.sizeof
    out = bytearray()
    for i in range(n):
        c = int(raw[i]) & 0xff
        if c == 0:
            break
        out.append(c)
    return out.decode("utf-8", "replace")


def _threads(rt):
    """Every live thread's control block (gdb.Value pointers), main first."""
    ttype = gdb.lookup_type("weft_thread_t")
    tptr = ttype.pointer()
    size = ttype.sizeof
    out = []
    main = rt["main"]
    if _u(main):
        out.append(main)
    sl = rt["pool"]["slabs"]
    while _u(sl):
        base = _u(sl) + SLAB_HEADER
        for i in range(int(sl["carved"])):
            t = gdb.Value(base + i * size).cast(tptr)
            jw = _u(t["join"])
            if _u(t["fn"]) and jw not in (JW_FREED, JW_JOINED):
                out.append(t)
        sl = sl["next"]
    return out


def _slot(rt, i):
    """VP slot i as weft_dump names it: "2", or "0 (spare 3)" for a system monitor's
    spare (slots from nvps on) standing in for VP 0."""
    nvps = int(rt["nvps"])
    if i < nvps:
        return "%d" % i
    j, n = i, 0
    while j >= nvps and n <= int(rt["nvps_all"]):  # a spare may stand in for a spare
        try:
            j = int(gdb.parse_and_eval("'monitor.c'::mon.spares[%d].target" % (j - nvps)))
        except gdb.error:
            j = 0
        n += 1
    return "%d (spare %d)" % (j if j < nvps else 0, i)


def _queued_on(rt, t, nvps):
    """The VP slot whose dispatch queue or hand-off slot holds t, or None."""
    for i in range(nvps):
        q = rt["vps"][i]["q"]
        if _u(q["next"]) == _u(t):
            return i
        h = q["head"]
        seen = 0
        while _u(h) and seen < 100000:
            if _u(h) == _u(t):
                return i
            h = h["next"]
            seen += 1
    return None


def _wired_tid(t):
    """The kernel thread id t runs on if it is wired (wire.c's registry), else None."""
    try:
        w = gdb.parse_and_eval("'wire.c'::wired_head")
    except gdb.error:
        return None
    seen = 0
    while _u(w) and seen < 100000:
        if _u(w["t"]) == _u(t):
            return int(w["tid"])
        w = w["next"]
        seen += 1
    return None


def _op_name(op):
    try:
        v = gdb.parse_and_eval("weft__io_op_names[%d]" % op)
        return v.string() if _u(v) else None
    except gdb.error:
        return None


def _symbol_at(addr):
    """The name of the function that starts at addr, or None. The innermost block at
    a function's entry may be that of a function inlined there (a header's inline
    helper at the top of the body): the outermost function block is the function's
    own, so the walk goes up to it (it named the inlined helper)."""
    try:
        b = gdb.block_for_pc(addr)
        f = None
        while b is not None and not (b.is_global or b.is_static):
            if b.function is not None:
                f = b.function
            b = b.superblock
        if f is not None and _u(f.value().address) == addr:
            return f.name
    except (gdb.error, RuntimeError):
        pass
    return None


# Or'ed into an fd wait's kind while the thread's stack memory is given back
# (core/tcb.h WEFT__WX_IDLE_STACK): its saved context is not on its stack then.
IDLE_STACK = 16
IDLE_STACK_TEXT = " (idle: its stack's memory is given back until it wakes)"


def _idle_stack(w):
    return w & 7 == 0 and ((w >> 3) & 31) & IDLE_STACK and ((w >> 3) & 15) in (1, 2, 3)


def _waiting_x_text(w):
    """The waits outside weft's sync objects (core/tcb.h, WEFT__WAITING_X)."""
    xk = (w >> 3) & 31
    v = w >> 8
    if xk & IDLE_STACK and (xk & ~IDLE_STACK) in (1, 2, 3):
        return _waiting_x_text(w & ~(IDLE_STACK << 3)) + IDLE_STACK_TEXT
    if xk in (1, 2, 3):
        how = {1: "readable", 2: "writable", 3: "readable or writable"}[xk]
        return "waiting in weft I/O for fd %d to be %s" % (v & 0xffffffff, how)
    if xk == 4:
        fd = (v >> 8) & 0xffffffff
        if fd >= 1 << 31:
            fd -= 1 << 32
        text = "waiting in weft I/O for an io_uring %s" % (_op_name(v & 63) or "request")
        return text + (" on fd %d" % fd if fd >= 0 else "")
    if xk == 5:
        name = _symbol_at(v)
        return "in weft_blocking, running 0x%x%s on a pool kernel thread" % (
            v, " " + name if name else "")
    return "blocked (waiting word 0x%x)" % w


def _waiting_text(w):
    k = w & 7
    if k == 0:
        return _waiting_x_text(w)
    if k == 6:
        return "sleeping"
    return "blocked on %s 0x%x" % (KINDS.get(k, "?"), w & ~7)


def _state(rt, t, by_addr):
    """(state text, parked) as weft_dump shows them."""
    nvps = int(rt["nvps_all"])  # the monitor's spares too
    jw = _u(t["join"])
    if jw == JW_DONE:
        return "finished, not yet joined", False
    for i in range(nvps):
        if _u(rt["vps"][i]["current"]) == _u(t):
            return "running on VP %s" % _slot(rt, i), False
    w = _u(t["waiting"])
    q = _queued_on(rt, t, nvps)
    if w:
        # a woken thread keeps its waiting word until it runs again
        if q is not None:
            return "ready on VP %s (woken; it was %s)" % (_slot(rt, q), _waiting_text(w)), True
        return _waiting_text(w), True
    j = _u(t["blocked_on"])
    if j in by_addr:
        jj = by_addr[j]
        jjw = _u(jj["join"])
        if jjw & 7 == JW_WEFT and (jjw & ~7) == _u(t):
            return "blocked in weft_join on thread %d" % int(jj["id"]), True
    if q is not None:
        if _u(t["ctx"]["sp"]):
            return "ready on VP %s" % _slot(rt, q), True
        return "new, ready on VP %s" % _slot(rt, q), False
    if not _u(t["ctx"]["sp"]):
        return "new, not started", False
    tid = _wired_tid(t)
    if tid is not None:
        # it runs on a kernel thread of its own: its saved context is stale
        return "wired, on kernel thread %d" % tid, False
    return "parked (thread list, weft_thread_block, or its scheduler's)", True


def _describe(rt, t, by_addr):
    st, _ = _state(rt, t, by_addr)
    nm = _name(t)
    s = "%-8d %-24s %s" % (int(t["id"]), ('"%s"' % nm) if nm else "", st)
    if _u(t) == _u(rt["main"]):
        s += " (main)"
    return s


def _find(rt, key):
    ths = _threads(rt)
    for t in ths:
        if (key.isdigit() and int(t["id"]) == int(key)) or _name(t) == key:
            return t, ths
    raise gdb.GdbError("weft: no live thread with id or name %s" % key)


class InfoWeftThreads(gdb.Command):
    """List weft's user-level threads: id, name, state (VP, or what it waits on)."""

    def __init__(self):
        super().__init__("info weft-threads", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        rt = _rt()
        if int(rt["state"]) != 1:
            print("weft is not running")
            return
        ths = _threads(rt)
        by_addr = {_u(t): t for t in ths}
        print("%-8s %-24s %s" % ("Id", "Name", "State"))
        for t in ths:
            print(_describe(rt, t, by_addr))


def _arch():
    return gdb.selected_frame().architecture().name()


def _read(addr):
    return int(gdb.parse_and_eval("*(unsigned long *)0x%x" % addr))


# Saved frames (src/arch/frame.h): register -> offset from the saved sp, the
# resume address, the frame size (the stack pointer after the switch returns), and
# the offset of the real resume address in the extension above a frame of switch
# mode ALL (weft__ctx_fp_save: the frame resumes at weft__ctx_fp_resume, which pops
# WEFT__FPEXT_SIZE = 16 more bytes).
# AArch64: x19-x28 in pairs from +0, x29 at +80, x30 (the link register, which the
# switch's ret resumes at and leaves in x30) at +88, d8-d15 at +96..+152 (not given to
# gdb: they are the low halves of v8-v15, which gdb has only as 128-bit registers),
# errno at +160, 176 bytes. Checked by reading against src/arch/frame.h and
# src/arch/aarch64/switch_arm64_aapcs_elf_gas.S, not run (no AArch64 gdb here).
X86_64 = ({"r15": 8, "r14": 16, "r13": 24, "r12": 32, "rbx": 40, "rbp": 48},
          "rip", 56, "rsp", 64, 8)
AARCH64 = ({"x19": 0, "x20": 8, "x21": 16, "x22": 24, "x23": 32, "x24": 40, "x25": 48,
            "x26": 56, "x27": 64, "x28": 72, "x29": 80, "x30": 88},
           "pc", 88, "sp", 176, 0)
FPEXT_SIZE = 16


try:
    from gdb.unwinder import Unwinder, register_unwinder
except ImportError:  # a gdb without Python unwinders: no core-file backtraces
    Unwinder = None


class _FrameId(object):
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


# The caller registers the unwinder gives frame #0 while a context is selected
# (name -> value), the selected weft thread's id, the gdb thread (ptid) whose
# frame #0 gets them, and the stack address frame #0's id is given (below the parked
# thread's frames; see the unwinder); None when off.
_selected = {"regs": None, "id": None, "ptid": None, "id_sp": None}

if Unwinder is not None:
    class _ParkedContextUnwinder(Unwinder):
        """Presents a parked weft thread's saved context as the caller of frame #0."""

        def __init__(self):
            super().__init__("weft-parked-context")

        def __call__(self, pending):
            regs = _selected["regs"]
            if regs is None or pending.level() != 0:
                return None
            th = gdb.selected_thread()  # only the kernel thread it was selected on
            if th is not None and _selected["ptid"] is not None and th.ptid != _selected["ptid"]:
                return None
            arch = pending.architecture().name()
            spname, pcname = ("rsp", "rip") if "x86-64" in arch else ("sp", "pc")
            # Frame #0's id names a stack address just below the parked context, not
            # the kernel thread's own stack pointer: the parked thread's stack may lie
            # below the kernel thread's (a mapped stack under the main thread's), and
            # gdb stops a backtrace whose caller frame is inner to its callee ("previous
            # frame inner to this frame") when both are normal frames, as they are when
            # the context resumes in a function's own code (weft_join after its call of
            # join_block), not inside an inlined switch.
            id_sp = _selected["id_sp"]
            ul = gdb.lookup_type("unsigned long")
            fid = _FrameId(gdb.Value(id_sp).cast(ul) if id_sp is not None
                           else pending.read_register(spname),
                           pending.read_register(pcname))
            info = pending.create_unwind_info(fid)
            for r, v in regs.items():
                info.add_saved_register(r, gdb.Value(v).cast(ul))
            return info

    register_unwinder(None, _ParkedContextUnwinder(), replace=True)


def _is_core():
    try:
        return gdb.selected_inferior().connection.type == "core"
    except (AttributeError, gdb.error):
        return False


def _context_regs(t):
    """The registers of a parked thread's context: (layout regs dict with values,
    pc name, pc, sp name, sp) from its saved switch frame."""
    arch = _arch()
    if "x86-64" in arch:
        layout = X86_64
    elif "aarch64" in arch:
        layout = AARCH64
    else:
        raise gdb.GdbError("weft: no frame layout for %s" % arch)
    regs, pcname, pcoff, spname, framesize, fpext_resume = layout
    sp = _u(t["ctx"]["sp"])
    vals = {r: _read(sp + off) for r, off in regs.items()}
    pc = _read(sp + pcoff)
    after = sp + framesize
    try:
        fp_resume = _u(gdb.parse_and_eval("&weft__ctx_fp_resume"))
    except gdb.error:
        fp_resume = None
    if fp_resume is not None and pc == fp_resume:  # switch mode ALL: the real resume
        pc = _read(after + fpext_resume)
        after += FPEXT_SIZE
        if "x30" in vals:
            vals["x30"] = pc
    if pc == 0 and _is_core():
        raise gdb.GdbError(
            "weft: thread %d's saved context reads as zeros: its stack is not in this core. "
            "gdb's gcore cannot read stack mappings that hold guard regions (MADV_GUARD_INSTALL, "
            "Linux 6.13+): use a kernel core dump, or run with WEFT_STACK_GUARD=mprotect "
            "(docs/debugging.md)" % int(t["id"]))
    return vals, pcname, pc, spname, after


def _select(regs, id_sp=None):
    th = gdb.selected_thread()
    _selected["regs"] = regs
    _selected["ptid"] = th.ptid if (regs is not None and th is not None) else None
    _selected["id_sp"] = id_sp if regs is not None else None
    gdb.invalidate_cached_frames()


def _bt_unwound(full):
    """`bt` with the unwinder on, frame #0 (the kernel thread's own) left out and
    the rest numbered from #0."""
    out = gdb.execute("bt" + (" full" if full else ""), to_string=True)
    lines, keep = [], False
    for ln in out.splitlines():
        m = re.match(r"#(\d+)(\s.*)$", ln)
        if m:
            keep = int(m.group(1)) >= 1
            if keep:
                ln = "#%s %s" % (str(int(m.group(1)) - 1).ljust(2), m.group(2).lstrip(" "))
        if keep:
            lines.append(ln)
    print("\n".join(lines))


class WeftThread(gdb.Command):
    """weft-thread ID|NAME [bt [full] | select]: show a weft thread; bt: its backtrace
(parked threads: from the context saved when it was switched away); select: frames #1
and on become that thread's, for `frame N` and `info locals`; weft-thread none: back."""

    def __init__(self):
        super().__init__("weft-thread", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        argv = gdb.string_to_argv(arg)
        if not argv:
            raise gdb.GdbError("usage: weft-thread ID|NAME [bt [full] | select] | none")
        if argv[0] == "none" and len(argv) == 1:
            was = _selected["id"]
            _selected["id"] = None
            _select(None)
            print("weft: no weft thread selected" if was is None else
                  "weft: thread %d's frames are gone; frame #0's caller is its own again" % was)
            return
        rt = _rt()
        t, ths = _find(rt, argv[0])
        by_addr = {_u(x): x for x in ths}
        print(_describe(rt, t, by_addr))
        if len(argv) < 2:
            return
        if argv[1] not in ("bt", "select"):
            raise gdb.GdbError("weft-thread: unknown subcommand %s" % argv[1])
        st, parked = _state(rt, t, by_addr)
        if parked and _idle_stack(_u(t["waiting"])):
            raise gdb.GdbError("weft: thread %d has no backtrace while its stack's memory is "
                               "given back (it waits in weft I/O, idle; docs/io.md \"Stacks of "
                               "idle threads\"): weft copies the stack back when it wakes"
                               % int(t["id"]))
        if not parked:
            if st.startswith("running"):
                raise gdb.GdbError("weft: thread %d is running: use gdb's own `thread N` "
                                   "and `bt` on its VP's kernel thread" % int(t["id"]))
            raise gdb.GdbError("weft: thread %d has no saved context (%s)" % (int(t["id"]), st))
        try:  # the assembly switch's frames only: a ucontext build has no trampoline
            gdb.execute("info address weft__ctx_trampoline", to_string=True)
        except gdb.error:
            raise gdb.GdbError("weft: no weft__ctx_trampoline: a ucontext build, whose saved "
                               "contexts this command does not read")
        regs, pcname, pc, spname, sp = _context_regs(t)
        regs[pcname] = pc
        regs[spname] = sp
        id_sp = _u(t["ctx"]["sp"])  # the saved frame's base: below every frame it resumes
        if argv[1] == "select":
            if Unwinder is None:
                raise gdb.GdbError("weft: this gdb has no Python frame unwinders")
            _select(regs, id_sp)
            _selected["id"] = int(t["id"])
            print("frames #1 and on are thread %d's (frame #0 is the kernel thread's own); "
                  "`weft-thread none` ends this" % int(t["id"]))
            return
        full = "full" in argv[2:]
        if Unwinder is not None:  # live process or core: nothing is written
            prev, prev_sp = _selected["regs"], _selected["id_sp"]
            _select(regs, id_sp)
            try:
                _bt_unwound(full)
            finally:
                _select(prev, prev_sp)
            return
        if _is_core():
            raise gdb.GdbError("weft: this gdb has no Python frame unwinders, which a "
                               "core file's backtraces need")
        # a gdb without unwinders, live process: switch the registers for `bt`
        names = list(regs)
        gdb.execute("frame 0", to_string=True)
        saved = {r: int(gdb.parse_and_eval("$" + r).cast(gdb.lookup_type("unsigned long")))
                 for r in names}
        try:
            for r in names:
                if r not in (pcname, spname):
                    gdb.execute("set $%s = 0x%x" % (r, regs[r]), to_string=True)
            gdb.execute("set $%s = 0x%x" % (spname, regs[spname]), to_string=True)
            gdb.execute("set $%s = 0x%x" % (pcname, regs[pcname]), to_string=True)
            gdb.execute("bt" + (" full" if full else ""))
        finally:
            gdb.execute("frame 0", to_string=True)
            for r in names:
                gdb.execute("set $%s = 0x%x" % (r, saved[r]), to_string=True)


InfoWeftThreads()
WeftThread()
