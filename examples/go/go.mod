module sluice.example/ratelimit

go 1.19
