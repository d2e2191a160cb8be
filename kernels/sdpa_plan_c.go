package kernels

import (
	"fmt"
	"regexp"
	"strings"

	"evotune/space"
)

// Status codes of the C plan functions that SDPAPlanC renders, as
// PREFIX_PLAN_OK and so on.
const (
	PlanCOK           = 0
	PlanCBadShape     = 1 // a non-positive batch, head count or sequence length
	PlanCBadHeadDim   = 2 // a head dimension the config was not compiled for
	PlanCNoSMs        = 3 // persistent=1 and no SM count
	PlanCTooManyTiles = 4 // more tiles than a grid numbers
)

// planCStatus renders the status codes every family's C plan functions
// return, as P_PLAN_OK and so on: the launcher's forward reads them alike.
func planCStatus(P string) string {
	return fmt.Sprintf(`
enum {
    %[1]s_PLAN_OK = %[2]d,
    %[1]s_PLAN_BAD_SHAPE = %[3]d,
    %[1]s_PLAN_BAD_HEAD_DIM = %[4]d,
    %[1]s_PLAN_NO_SMS = %[5]d,
    %[1]s_PLAN_TOO_MANY_TILES = %[6]d
};
`, P, PlanCOK, PlanCBadShape, PlanCBadHeadDim, PlanCNoSMs, PlanCTooManyTiles)
}

// cIdent is what a prefix of the rendered C may be.
var cIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// planCHead starts a family's plan rendered as C: it checks prefix and
// writes struct PREFIX_plan with fields (the family's member lines, with
// their comments) and the status codes. planFunc names the Go function the
// C renders. It returns the builder and PREFIX in capitals.
func planCHead(family, planFunc, prefix, fields string) (*strings.Builder, string, error) {
	if !cIdent.MatchString(prefix) {
		return nil, "", fmt.Errorf("%s plan in C: prefix %q is not a C identifier", family, prefix)
	}
	b := &strings.Builder{}
	P := strings.ToUpper(prefix)
	fmt.Fprintf(b, "/* The launch plan of each config: kernels.%s rendered as C. */\nstruct %s_plan {\n%s};\n", planFunc, prefix, fields)
	b.WriteString(planCStatus(P))
	return b, P, nil
}

// planCFunc opens config i's plan function: a comment naming the config,
// then static inline int PREFIX_plan_I(b, h, s, d, sms, &plan) {.
func planCFunc(b *strings.Builder, prefix string, i int, c space.Config, d int) {
	fmt.Fprintf(b, "\n/* config %d: %s at D=%d */\n", i, c.Key(), d)
	fmt.Fprintf(b, "static inline int %s_plan_%d(int b, int h, int s, int d, int sms, struct %s_plan* p) {\n", prefix, i, prefix)
}

// SDPAPlanC renders SDPAPlan's rules for each of configs, compiled at head
// dimension d, as C that needs no CUDA header: a struct PREFIX_plan, and a
// function PREFIX_plan_I(b, h, s, d, sms, &plan) per config I that fills in
// the launches SDPAPlan gives for shape b x h x s x d on a GPU of sms SMs
// and returns PREFIX_PLAN_OK, or another PREFIX_PLAN_ status without a
// launch where SDPAPlan would return an error (or d is not the config's).
// The quantities fixed by the config (threads, shared memory, split, tile
// rows) are SDPAPlan's own, computed here; the rules over the shape follow
// SDPAPlan line by line, and TestSDPAPlanC compiles them and compares.
func SDPAPlanC(prefix string, configs []space.Config, d int) (string, error) {
	b, P, err := planCHead(sdpaName, "SDPAPlan", prefix, `    long long grid;             /* sdpa_fwd CTAs (grid.x) */
    int threads;                /* sdpa_fwd threads per CTA */
    int smem_bytes;             /* sdpa_fwd dynamic shared memory */
    int split_kv;               /* key chunks; sdpa_combine runs when > 1 */
    long long combine_grid;     /* sdpa_combine CTAs, 0 when split_kv is 1 */
    int combine_threads;        /* sdpa_combine threads per CTA */
    long long workspace_bytes;  /* fp32 partials: o_part at 0, lse_part at lse_offset_bytes */
    long long lse_offset_bytes;
`)
	if err != nil {
		return "", err
	}
	for i, c := range configs {
		g, err := geomOf(c, d)
		if err != nil {
			return "", fmt.Errorf("sdpa plan in C, config %s: %w", c.Key(), err)
		}
		if err := g.layoutErr(); err != nil {
			return "", fmt.Errorf("sdpa plan in C, config %s: %w", c.Key(), err)
		}
		planCFunc(b, prefix, i, c, d)
		fmt.Fprintf(b, "    const long long max_grid = %dLL;\n", int64(maxGridX))
		b.WriteString("    long long bh, m_blocks, tiles, grid;\n")
		fmt.Fprintf(b, "    if (b <= 0 || h <= 0 || s <= 0) return %s_PLAN_BAD_SHAPE;\n", P)
		fmt.Fprintf(b, "    if (d != %d) return %s_PLAN_BAD_HEAD_DIM;\n", d, P)
		b.WriteString("    bh = (long long)b * h;\n")
		fmt.Fprintf(b, "    m_blocks = ((long long)s + %d - 1) / %d;\n", g.blockM, g.blockM)
		fmt.Fprintf(b, "    if (bh > max_grid || bh * m_blocks > max_grid || bh * m_blocks * %d > max_grid) return %s_PLAN_TOO_MANY_TILES;\n", g.split, P)
		fmt.Fprintf(b, "    tiles = bh * m_blocks * %d;\n", g.split)
		b.WriteString("    grid = tiles;\n")
		if g.persistent {
			fmt.Fprintf(b, "    if (sms <= 0) return %s_PLAN_NO_SMS;\n", P)
			fmt.Fprintf(b, "    if (grid > (long long)sms * %d) grid = (long long)sms * %d;\n", g.minBlocks, g.minBlocks)
		} else {
			b.WriteString("    (void)sms;\n")
		}
		b.WriteString("    p->grid = grid;\n")
		fmt.Fprintf(b, "    p->threads = %d;\n", g.threads())
		fmt.Fprintf(b, "    p->smem_bytes = %d;\n", g.sharedBytes())
		fmt.Fprintf(b, "    p->split_kv = %d;\n", g.split)
		if g.split > 1 {
			b.WriteString("    {\n")
			b.WriteString("        const long long rows = bh * s;\n")
			fmt.Fprintf(b, "        const long long chunks = (rows + %d - 1) / %d;\n", combineRowsPerBlock, combineRowsPerBlock)
			fmt.Fprintf(b, "        p->lse_offset_bytes = (%d * rows * %d * 4 + 15) / 16 * 16;\n", g.split, d)
			fmt.Fprintf(b, "        p->workspace_bytes = p->lse_offset_bytes + %d * rows * 4;\n", g.split)
			fmt.Fprintf(b, "        p->combine_grid = chunks < %dLL ? chunks : %dLL;\n", maxCombineGrid, maxCombineGrid)
			fmt.Fprintf(b, "        p->combine_threads = %d;\n", combineThreads)
			b.WriteString("    }\n")
		} else {
			b.WriteString("    p->lse_offset_bytes = 0;\n")
			b.WriteString("    p->workspace_bytes = 0;\n")
			b.WriteString("    p->combine_grid = 0;\n")
			b.WriteString("    p->combine_threads = 0;\n")
		}
		fmt.Fprintf(b, "    return %s_PLAN_OK;\n}\n", P)
	}
	return b.String(), nil
}

// sdpaLaunchC is the SDPA family's launch function for export's launcher:
// sdpa_fwd (fns[0]), then sdpa_combine (fns[1]) when the keys are split.
func sdpaLaunchC(prefix string) string {
	return fmt.Sprintf(`// launch runs a plan: the forward kernel, then the combine pass when the
// keys are split.
cudaError_t launch(const void* const* fns, std::atomic<unsigned long long>& smem_done,
                   const struct %[1]s_plan& pl, SdpaParams p, cudaStream_t stream) {
    cudaError_t err = allow_smem(fns[0], pl.smem_bytes, smem_done);
    if (err != cudaSuccess) return err;
    void* args[] = {&p};
    err = cudaLaunchKernel(fns[0], dim3(static_cast<unsigned>(pl.grid)), dim3(pl.threads), args,
                           static_cast<size_t>(pl.smem_bytes), stream);
    if (err != cudaSuccess || pl.split_kv <= 1) return err;
    return cudaLaunchKernel(fns[1], dim3(static_cast<unsigned>(pl.combine_grid)), dim3(pl.combine_threads), args, 0, stream);
}
`, prefix)
}
