"""The queue's SQL, named by what each query does; callers never write SQL themselves."""
