// Contract (scale_planes_contract). Skeleton: replaced by the feature work; registered in contracts.cpp once built.
