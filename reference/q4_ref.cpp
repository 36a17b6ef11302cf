// float64 reference (q4_ref). Skeleton: replaced by the codec work.
