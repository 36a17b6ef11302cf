// Contract (mxfp4_rows_contract). Skeleton: replaced by the feature work; registered in contracts.cpp once built.
