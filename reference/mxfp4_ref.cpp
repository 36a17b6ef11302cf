// float64 reference (mxfp4_ref). Skeleton: replaced by the codec work.
