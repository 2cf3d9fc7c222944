// loss.cu: PolicyLoss, the per-token policy-gradient loss of GRPO and its
// relatives (kernels.LossParams, whose spec is kernels/ref: clipped PPO
// surrogate with optional Delta cap, CISPO, SAPO, VESPO, plain PG; token- or
// sequence-level ratios for each; k3 KL with optional bias correction;
// entropy bonus; IS correction; entropy mask; off-policy sequence mask),
// with d loss/d logp and the per-token diagnostics, without a host round
// trip.
//
// Layout: N tokens laid out sequence after sequence; every per-token array
// is [N] float32 (Clip uint8), arguments in one LossArgs struct in memory
// the kernel reads. seg[S+1] are segment offsets: the sequences when the
// caller gave them, else chunks of tokens (only per-token terms then).
// Launch: one block of 256 threads per segment (grid S). The sequence sums
// (GSPO's mean log-ratio and its gradient, VESPO's log-ratio, the
// off-policy mask's mean sampling − logp) are float64
// block sums in a fixed tree; every token's terms are computed in float64,
// as in the reference, and rounded to float32 once. A token's terms are
// recomputed in the second pass instead of stored (no scratch).
// Assumes the arguments passed kernels.CheckPolicyLoss; segment offsets
// that do not run from 0 to n without decreasing skip their block and are
// reported in the status slot (common.cuh, report_bad_index).
// Checked against: kerneltest.PolicyLoss (every objective at both ratio
// levels, KL with bias correction, IS ratios, masks, the entropy and
// off-policy masks, the entropy bonus's own weights) on the SIMT host
// build.
#include "common.cuh"

struct LossArgs {
  const float* logp;
  const float* entropy;
  const float* old_logp;  // may be null
  const float* ref_logp;
  const float* adv;      // null with seq_adv
  const float* seq_adv;  // [S], null with adv
  const float* mask;     // may be null
  const float* is_ratio;  // may be null
  const float* weight;
  const float* entropy_mask;   // may be null
  const float* sampling_logp;  // may be null
  const float* entropy_weight;  // may be null (the entropy bonus then has weight's)
  const int32_t* seg;  // [S+1]
  float* loss;
  float* dlogp;
  float* dentropy;  // optional outputs below may be null
  float* ratio;
  float* kl;
  uint8_t* clip;
  float* phi;
  int objective, sequence_ratio, kl_bias, off_policy;
  float eps_low, eps_high, delta, tau_pos, tau_neg, k_pos, lam_pos, k_neg, lam_neg, beta, entropy_coef;
  float off_policy_threshold;
};

namespace loss_impl {

enum { OBJ_CLIPPED = 0, OBJ_CISPO = 1, OBJ_SAPO = 2, OBJ_VESPO = 3, OBJ_PG = 4 };
enum { CLIP_LOW = 1, CLIP_HIGH = 2 };

struct Token {
  double loss, direct, dldw, w_ratio, kl, phi, he;  // direct: wt·∂ℓ/∂logp at fixed w; dldw: wt·dℓ/dw; he: W^H_t·E_t
  uint8_t clip;
};

__device__ __forceinline__ double mask_of(const LossArgs& a, int t) { return a.mask ? double(a.mask[t]) : 1.0; }
__device__ __forceinline__ double delta_of(const LossArgs& a, int t) {
  return a.old_logp ? double(a.logp[t]) - double(a.old_logp[t]) : 0.0;
}
__device__ __forceinline__ double clampd(double x, double lo, double hi) { return fmin(fmax(x, lo), hi); }

// sampling_of is the off-policy mask's sampling log-prob: sampling_logp,
// else old_logp, else logp (the reference's fallbacks).
__device__ __forceinline__ double sampling_of(const LossArgs& a, int t) {
  return a.sampling_logp ? double(a.sampling_logp[t]) : a.old_logp ? double(a.old_logp[t]) : double(a.logp[t]);
}

// token computes token t's terms given its log-ratio logw (and VESPO's
// sequence ratio vw, log-ratio vlw; off the off-policy mask's mean).
__device__ __forceinline__ Token token(const LossArgs& p, int t, double adv, double logw, double vlw, double vw, double off) {
  Token r{};
  double a = adv, wt = p.weight[t], lp = p.logp[t];
  double w = exp(logw);
  double l = 0, dw = 0, direct = 0, ratio = w, phi = 1;
  uint8_t clip = 0;
  double eps_lo = 1 - double(p.eps_low), eps_hi = 1 + double(p.eps_high);
  switch (p.objective) {
    case OBJ_CLIPPED: {
      double wc = w;
      bool capped = false;
      if (p.delta > 0 && w > double(p.delta)) wc = p.delta, capped = true;
      double c = clampd(w, eps_lo, eps_hi);
      if (wc * a <= c * a) {
        l = -wc * a;
        if (!capped) dw = -a;
      } else {
        l = -c * a;
        if (w >= eps_lo && w <= eps_hi) dw = -a;
      }
      ratio = wc;
      if (wc < eps_lo && a < 0) clip |= CLIP_LOW;
      if (wc > eps_hi && a > 0) clip |= CLIP_HIGH;
      break;
    }
    case OBJ_CISPO: {
      double c = fmin(w, double(p.eps_high));
      l = -c * a * lp;
      direct = -c * a;
      if (w > double(p.eps_high) && a > 0) clip |= CLIP_HIGH;
      break;
    }
    case OBJ_SAPO: {
      double tau = a > 0 ? p.tau_pos : p.tau_neg;
      double sg = 1 / (1 + exp(-tau * (w - 1)));
      l = -(4 / tau) * sg * a;
      dw = -4 * sg * (1 - sg) * a;
      break;
    }
    case OBJ_VESPO: {
      double k = p.k_pos, lam = p.lam_pos;
      if (a < 0) k = p.k_neg, lam = p.lam_neg;
      lam = fmax(lam, 1e-4);
      phi = exp(lam + k * vlw - lam * vw);
      if (!(phi - phi == 0)) phi = 0;  // NaN or ±Inf
      l = -phi * a * lp;
      direct = -phi * a;
      ratio = vw;
      break;
    }
    default:  // OBJ_PG
      l = -a * lp;
      direct = -a;
  }
  // The policy term's factor f = O·E·ρ.
  double f = 1, e = 1;
  if (p.off_policy && a < 0 && off > double(p.off_policy_threshold)) f = 0;
  if (p.entropy_mask) e = p.entropy_mask[t], f *= e;
  if (p.is_ratio && p.objective != OBJ_VESPO) f *= double(p.is_ratio[t]);
  l *= f, dw *= f, direct *= f;
  double kl = 0;
  if (p.beta != 0) {
    double x = double(p.ref_logp[t]) - lp;
    kl = exp(x) - x - 1;
    double dkl = 1 - exp(x);
    if (p.kl_bias) {
      dw += double(p.beta) * kl;
      kl *= w, dkl *= w;
    }
    direct += double(p.beta) * dkl;
  }
  double h = p.entropy_coef != 0 ? double(p.entropy[t]) : 0;
  double wh = p.entropy_weight ? double(p.entropy_weight[t]) : wt;  // the entropy bonus's weight W^H
  r.loss = wt * (l + double(p.beta) * kl) - double(p.entropy_coef) * wh * e * h;
  r.he = wh * e;
  r.direct = wt * direct;
  r.dldw = wt * dw;
  r.w_ratio = ratio;
  r.kl = kl;
  r.phi = phi;
  r.clip = clip;
  return r;
}

}  // namespace loss_impl
using namespace loss_impl;

KERNEL void __launch_bounds__(256) policy_loss(const LossArgs* args, int n, int* status) {
  const LossArgs p = *args;
  const int s = blockIdx.x, t0 = p.seg[s], t1 = p.seg[s + 1];
  const bool last = s == int(gridDim.x) - 1;
  if (t0 < 0 || (s == 0 && t0 != 0)) {  // uniform over the block: it returns before any collective
    if (threadIdx.x == 0) report_bad_index(status, s, t0, n);
    return;
  }
  if (t1 < t0 || t1 > n || (last && t1 != n)) {
    if (threadIdx.x == 0) report_bad_index(status, s + 1, t1, n);
    return;
  }
  // Sequence sums: GSPO's mean log-ratio, VESPO's log-ratio, the
  // off-policy mask's mean sampling − logp.
  double seq_logw = 0, cnt = 0, vlw = 0, vw = 0, off = 0;
  if (p.sequence_ratio || p.off_policy) {
    double sum = 0, c = 0, o = 0;
    for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
      double m = mask_of(p, t);
      sum += m * delta_of(p, t), c += m;
      if (p.off_policy) o += m * (sampling_of(p, t) - double(p.logp[t]));
    }
    sum = block_sum_d(sum);
    cnt = block_sum_d(c);
    seq_logw = sum / fmax(cnt, 1.0);
    if (p.off_policy) off = block_sum_d(o) / fmax(cnt, 1.0);
  }
  if (p.objective == OBJ_VESPO) {
    double sum = 0;
    for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
      sum += mask_of(p, t) * clampd(delta_of(p, t), -20, 20);
      if (p.is_ratio) sum += mask_of(p, t) * clampd(log(double(p.is_ratio[t])), log(1e-8), 20);
    }
    vlw = clampd(block_sum_d(sum), log(1e-8), 20);
    vw = exp(vlw);
  }
  const double seq_adv = p.seq_adv ? double(p.seq_adv[s]) : 0;
  double g = 0;
  for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
    double adv = p.adv ? double(p.adv[t]) : seq_adv;
    double logw = p.sequence_ratio ? seq_logw : delta_of(p, t);
    Token k = token(p, t, adv, logw, vlw, vw, off);
    p.loss[t] = float(k.loss);
    if (p.dentropy) p.dentropy[t] = float(-double(p.entropy_coef) * k.he);
    if (p.ratio) p.ratio[t] = float(k.w_ratio);
    if (p.kl) p.kl[t] = float(k.kl);
    if (p.clip) p.clip[t] = k.clip;
    if (p.phi) p.phi[t] = float(k.phi);
    if (p.sequence_ratio)
      g += k.dldw * exp(logw);
    else
      p.dlogp[t] = float(k.direct + k.dldw * exp(logw));
  }
  if (!p.sequence_ratio) return;
  g = block_sum_d(g);
  for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
    double adv = p.adv ? double(p.adv[t]) : seq_adv;
    Token k = token(p, t, adv, seq_logw, vlw, vw, off);
    p.dlogp[t] = float(k.direct + g * mask_of(p, t) / fmax(cnt, 1.0));
  }
}
