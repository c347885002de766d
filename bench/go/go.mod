module weft/bench/go

go 1.21
