/** The usage family (version 2): `chatHistory/reportUsage` and the calibration it updates, which
 * scales later estimates. */

/** The calibration of a (provider kind, model): the median of its newest 20 usage ratios. */
export interface Calibration {
  /** 1.0 with no samples. */
  factor: number;
  /** At most 20. */
  samples: number;
}

/** `chatHistory/reportUsage` (no `conversationId`: calibration is per provider kind and model). */
export interface ReportUsageParams {
  /** A provider kind or an alias; default `chatHistory.activeProvider`. */
  provider?: string;
  model?: string;
  /** The `rawEstimatedTokens` of the request that was sent (integer ≥ 1). */
  estimatedTokens: number;
  /** The input tokens the provider reported, cached ones included (integer ≥ 1). */
  promptTokens: number;
}
export type ReportUsageResult = Calibration;
