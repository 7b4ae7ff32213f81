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
  function autocannon(
    opts: { url: string; connections: number; duration?: number; amount?: number; requests?: autocannon.Request[] },
    done: (err: Error | null, result: autocannon.Result) => void,
  ): { on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): void }
  export default autocannon
}
