declare module 'autocannon' {
  namespace autocannon {
    interface Histogram {
      average: number
      p50: number
      p99: number
    }
    interface Result {
      requests: Histogram
      latency: Histogram
      non2xx: number
      errors: number
    }
    interface Request {
      method?: string
      path?: string
      headers?: Record<string, string>
      body?: string
      setupRequest?: (req: Request) => Request
    }
  }
  function autocannon(opts: {
    url: string
    connections: number
    duration: number
    requests?: autocannon.Request[]
  }): Promise<autocannon.Result>
  export default autocannon
}
